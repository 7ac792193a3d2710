// LoadedModel: a checkpoint opened from disk with its tokenizer, the model bound
// to its weights (models/registry.h picks the family) and the runner that steps
// it — what every entry point starts from.
#pragma once

#include <memory>
#include <string>

#include "corvid/engine/runner.h"
#include "corvid/formats/model_files.h"
#include "corvid/models/model.h"
#include "corvid/models/weight_loader.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

struct LoadedModel {
  std::unique_ptr<ModelFiles> files;  // owns the mappings the model's host weight views point into
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<Runner> runner;
  WeightPlacement placement;  // the device, and experts offloaded to host memory

  // Opens a GGUF file or a Hugging Face folder; on CUDA the weights are uploaded
  // (in their stored format) and the model runs there. Throws corvid::Error naming
  // the file and the problem (bad file, unsupported architecture, missing tokenizer…).
  static LoadedModel load(const std::string& path, const WeightPlacement& placement = {});

  // Builds `model` (and its runner) over files->weights as `placement` says.
  void bind_model();
};

// One line on stderr saying what an expert offload put in host memory (nothing when
// none was asked for).
void report_offload(const Model& model, const WeightPlacement& placement);

// A copy of `host` whose tensors live on `device` (each in its own allocation, in
// ops::device_weight_dtype's layout), staged through at most staging_limit bytes.
WeightSet upload_weights(const WeightSet& host, Device device, size_t staging_limit = kUploadStagingBytes);

// Opens only the tokenizer of a GGUF file (also a tokenizer-only one) or a
// Hugging Face folder (tokenizer.json + tokenizer_config.json).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace corvid
