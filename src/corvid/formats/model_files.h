// One entry point from a user-given model path to everything the runtime loads:
// a .gguf file (config, weights and tokenizer all inside it) or a Hugging Face
// folder (config.json, optional generation_config.json, safetensors weights,
// tokenizer.json, optional tokenizer_config.json).
#pragma once

#include <memory>
#include <string>

#include "corvid/formats/gguf.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"

namespace corvid {

struct ModelFiles {
  std::string path;                   // as given
  ModelConfig config;
  GenerationConfig generation;        // empty for GGUF (it has no generation config)
  WeightSet weights;                  // HF tensor names in both cases
  std::shared_ptr<GgufFile> gguf;     // set for GGUF: its metadata holds the tokenizer
  std::string tokenizer_json;         // path; empty for GGUF
  std::string tokenizer_config_json;  // path; empty for GGUF or when the folder has none
  bool is_gguf() const { return gguf != nullptr; }
};

// Throws corvid::Error("<path>: ...") when the path does not exist, is neither a
// GGUF file nor a folder, or when any part is missing or invalid.
ModelFiles open_model(const std::string& path);

}  // namespace corvid
