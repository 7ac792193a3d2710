// One entry point from a user-given model path to everything the runtime loads:
// a .gguf file (config, weights and tokenizer all inside it) or a Hugging Face
// folder (config.json, optional generation_config.json, safetensors weights,
// tokenizer.json, optional tokenizer_config.json).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "corvid/formats/gguf.h"
#include "corvid/formats/gguf_model.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"

namespace corvid {

struct ModelFiles {
  std::string path;                   // as given
  ModelConfig config;
  nlohmann::json config_json;         // config.json as read (a family reads its own fields); null for GGUF
  GenerationConfig generation;        // empty for GGUF (it has no generation config)
  WeightSet weights;                  // HF tensor names in both cases
  std::shared_ptr<GgufFile> gguf;     // set for GGUF: its metadata holds the tokenizer
  std::string tokenizer_json;         // path; empty for GGUF
  std::string tokenizer_config_json;  // path; empty for GGUF or when the folder has none
  // A multimodal checkpoint (formats/multimodal_text.h) runs its language model only:
  // the wrapper's model_type ("gemma3", "gemma4") and how many tower tensors were left
  // out; config_json is then the text model's config. Empty / 0 otherwise.
  std::string multimodal_wrapper;
  int64_t tower_tensors = 0;
  bool is_gguf() const { return gguf != nullptr; }
};

// What the model layer (models/registry.h) makes of a checkpoint's configuration:
// the config with its family's defaults and fields, and the family's GGUF tensor
// names. Called once the config is read and before any tensor is indexed, so an
// unsupported model fails before its weights are touched.
struct ResolvedConfig {
  ModelConfig config;
  std::span<const GgufName> gguf_names;
};
using ConfigResolver =
    std::function<ResolvedConfig(const nlohmann::json* hf_config, const GgufFile* gguf, const std::string& source)>;

// Throws corvid::Error("<path>: ...") when the path does not exist, is neither a
// GGUF file nor a folder, or when any part is missing or invalid. Tensor shapes are
// checked when a model binds them (models/weight_loader.h). Callers want
// models/registry.h's open_model, which passes the registry's resolver.
ModelFiles open_model_files(const std::string& path, const ConfigResolver& resolve);

}  // namespace corvid
