// LoadedModel: a checkpoint opened from disk with its tokenizer and the model
// bound to its weights — what every entry point starts from.
#pragma once

#include <memory>
#include <string>

#include "corvid/formats/model_files.h"
#include "corvid/models/llama.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

struct LoadedModel {
  std::unique_ptr<ModelFiles> files;  // owns the mappings the model's weight views point into
  std::unique_ptr<WeightSet> device_weights;  // the weights copied to the GPU (CUDA only)
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LlamaModel> model;
  Device device = Device::CPU;

  // Opens a GGUF file or a Hugging Face folder; on CUDA the weights are uploaded
  // (in their stored format) and the model runs there. Throws corvid::Error naming
  // the file and the problem (bad file, unsupported architecture, missing tokenizer…).
  static LoadedModel load(const std::string& path, Device device = Device::CPU);

  // Builds `model` over files->weights on `device` (uploading them first off the CPU).
  void bind_model();
};

// A copy of `host` whose tensors live on `device`, in one allocation that the
// returned set's owners keep alive (each tensor 256-byte aligned). Weights the device
// keeps in another layout (ops::device_weight_dtype) pass through a staging buffer of
// at most staging_limit bytes (whole rows; at least one row), a chunk of rows at a time, so
// that loading needs little more device memory than the weights themselves.
inline constexpr size_t kUploadStagingBytes = size_t{64} << 20;
WeightSet upload_weights(const WeightSet& host, Device device, size_t staging_limit = kUploadStagingBytes);

}  // namespace corvid

namespace corvid {

// Opens only the tokenizer of a GGUF file (also a tokenizer-only one) or a
// Hugging Face folder (tokenizer.json + tokenizer_config.json).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace corvid
