#include "corvid/engine/dummy_weights.h"

#include <filesystem>

#include "corvid/core/error.h"
#include "corvid/formats/json_file.h"
#include "corvid/models/registry.h"

namespace corvid {

DType dummy_weight_dtype(const std::string& name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                  DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    if (dtype_name(t) == name) return t;
  fail("--dummy-weights: unknown dtype '", name, "' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
}

LoadedModel load_dummy_model(const std::string& config_path, DType dtype, const WeightPlacement& placement,
                             uint64_t seed) {
  std::string path = config_path;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "config.json").string();
  LoadedModel m;
  m.placement = placement;
  m.files = std::make_unique<ModelFiles>();
  m.files->path = path;
  m.files->config_json = read_json_file(path);
  m.files->config = read_model_config(m.files->config_json, path);
  m.model = make_dummy_model(m.files->config, m.files->config_json, path, dtype, seed, placement);
  report_offload(*m.model, placement);
  m.runner = std::make_unique<Runner>(*m.model);
  return m;
}

}  // namespace corvid
