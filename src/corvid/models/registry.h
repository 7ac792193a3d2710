// The model registry: which families this build runs, found by config.json's
// model_type or GGUF's general.architecture. Each family is one file under
// models/ (its config fields, tensor names and forward) plus one line in
// registry.cc. Resolving a checkpoint picks its family before any weight is
// touched, so an unsupported model fails at once and lists what is supported.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/formats/gguf.h"
#include "corvid/formats/gguf_model.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/model_files.h"
#include "corvid/models/model.h"
#include "corvid/models/profile.h"
#include "corvid/models/weight_loader.h"

namespace corvid {

// Where a family reads the fields only it knows: the config.json object or the
// GGUF metadata (one of the two is set).
struct FamilySource {
  const nlohmann::json* hf = nullptr;
  const GgufFile* gguf = nullptr;
  std::string path;  // for error messages
};

struct Family {
  const char* name;
  std::vector<std::string> model_types;  // config.json model_type values
  std::vector<std::string> gguf_archs;   // GGUF general.architecture values
  // The defaults of its transformers config class for a model_type.
  ConfigDefaults (*defaults)(const std::string& model_type);
  // Sets what ModelConfig holds that the family derives its own way (biases, windows,
  // rope layout, ...); throws for fields it cannot run.
  void (*configure)(ModelConfig& config, const FamilySource& source);
  std::span<const GgufName> gguf_names;  // its own GGUF tensor names, beyond the shared ones
  // Binds the weights (asking `weights` for each tensor) and builds the model.
  std::unique_ptr<Model> (*make)(const ModelConfig& config, const FamilySource& source, WeightLoader& weights);
  // What corvid claims about its outputs (ModelProfile::fidelity).
  const char* fidelity = "";
  // Fills in the needs a family knows beyond ModelConfig (head sizes of its own, shared
  // KV); null: head_dim and sliding_window tell it all.
  void (*needs)(ModelProfile& profile, const ModelConfig& config, const FamilySource& source) = nullptr;
};

const std::vector<Family>& model_families();
// The family of a model_type / GGUF architecture; corvid::Error naming `source` and
// listing the supported ones when there is none.
const Family& family_for_model_type(const std::string& model_type, const std::string& source);
const Family& family_for_gguf_arch(const std::string& arch, const std::string& source);

// config.json → ModelConfig with the family's defaults and fields.
ModelConfig read_model_config(const nlohmann::json& config, const std::string& source);
// GGUF metadata → ModelConfig with the family's fields.
ModelConfig read_gguf_config(const GgufFile& gguf);

// The profile of a resolved config (ModelConfig::family set), before any weight is read.
ModelProfile model_profile(const ModelConfig& config, const FamilySource& source);

// Opens a GGUF file or a Hugging Face folder (formats/model_files.h) with the
// registry resolving its family.
ModelFiles open_model(const std::string& path);

// Builds the model of an opened checkpoint on placement.device (weights uploaded there,
// offloaded experts in pinned host memory).
std::unique_ptr<Model> make_model(const ModelFiles& files, const WeightPlacement& placement);
// The same over a config and weights given separately (`weights` outlives the model).
std::unique_ptr<Model> make_model(const ModelConfig& config, const FamilySource& source, const WeightSet& weights,
                                  const WeightPlacement& placement);
// Builds the model of a config alone with made-up weights in `dtype` (benchmarks).
std::unique_ptr<Model> make_dummy_model(const ModelConfig& config, const nlohmann::json& config_json,
                                        const std::string& source, DType dtype, uint64_t seed,
                                        const WeightPlacement& placement);

}  // namespace corvid
