#include "corvid/models/registry.h"

#include "corvid/core/error.h"
#include "corvid/formats/printable.h"
#include "corvid/models/families.h"

namespace corvid {

const std::vector<Family>& model_families() {
  static const std::vector<Family> kFamilies = {
      llama_family(),
      gemma3_family(),
      olmo2_family(),
      granite_family(),
      smollm3_family(),
      phi3_family(),
      gemma4_family(),
      qwen_moe_family(),
      bert_family(),
  };
  return kFamilies;
}

namespace {

std::string supported(std::vector<std::string> Family::*names) {
  std::string list;
  for (const Family& f : model_families())
    for (const std::string& n : f.*names) list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

// The family listing `name` under `names`; otherwise an error naming `what` and the supported ones.
static const Family& find_family(std::vector<std::string> Family::*names, const std::string& name, const char* what,
                                 const std::string& source) {
  for (const Family& f : model_families())
    for (const std::string& n : f.*names)
      if (n == name) return f;
  fail(source, ": unsupported ", what, " '", printable(name), "' (supported: ", supported(names), ")");
}

const Family& family_for_model_type(const std::string& model_type, const std::string& source) {
  return find_family(&Family::model_types, model_type, "model_type", source);
}

const Family& family_for_gguf_arch(const std::string& arch, const std::string& source) {
  return find_family(&Family::gguf_archs, arch, "GGUF architecture", source);
}

ModelConfig read_model_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) fail(source, ": config must be a JSON object");
  auto it = config.find("model_type");
  if (it == config.end() || !it->is_string()) fail(source, ": missing required field model_type");
  const Family& family = family_for_model_type(it->get<std::string>(), source);
  ModelConfig c = parse_model_config(config, source, family.defaults(it->get<std::string>()));
  c.family = family.name;
  family.configure(c, FamilySource{&config, nullptr, source});
  return c;
}

ModelConfig read_gguf_config(const GgufFile& gguf) {
  const Family& family = family_for_gguf_arch(gguf.get_string("general.architecture"), gguf.path());
  ModelConfig c = model_config_from_gguf(gguf);
  c.family = family.name;
  family.configure(c, FamilySource{nullptr, &gguf, gguf.path()});
  return c;
}

ModelProfile model_profile(const ModelConfig& c, const FamilySource& source) {
  const Family& family = source.gguf ? family_for_gguf_arch(c.architecture, source.path)
                                     : family_for_model_type(c.architecture, source.path);
  ModelProfile p;
  p.family = family.name;
  p.architecture = c.architecture;
  p.fidelity = family.fidelity;
  p.max_head_dim = c.head_dim;
  p.sliding_window = c.sliding_window.has_value();
  if (family.needs) family.needs(p, c, source);
  return p;
}

ModelFiles open_model(const std::string& path) {
  return open_model_files(path, [](const nlohmann::json* hf, const GgufFile* gguf, const std::string& source) {
    if (hf) return ResolvedConfig{read_model_config(*hf, source), {}};
    const Family& family = family_for_gguf_arch(gguf->get_string("general.architecture"), gguf->path());
    return ResolvedConfig{read_gguf_config(*gguf), family.gguf_names};
  });
}

std::unique_ptr<Model> make_model(const ModelConfig& config, const FamilySource& source, const WeightSet& weights,
                                  const WeightPlacement& placement) {
  const Family& family = source.gguf ? family_for_gguf_arch(config.architecture, source.path)
                                     : family_for_model_type(config.architecture, source.path);
  check_profile_on(model_profile(config, source), placement.device, source.path);  // before any weight is read
  WeightLoader loader(weights, placement);
  return family.make(config, source, loader);
}

std::unique_ptr<Model> make_model(const ModelFiles& files, const WeightPlacement& placement) {
  return make_model(files.config, FamilySource{files.gguf ? nullptr : &files.config_json, files.gguf.get(), files.path},
                    files.weights, placement);
}

std::unique_ptr<Model> make_dummy_model(const ModelConfig& config, const nlohmann::json& config_json,
                                        const std::string& source, DType dtype, uint64_t seed,
                                        const WeightPlacement& placement) {
  const Family& family = family_for_model_type(config.architecture, source);
  const FamilySource src{&config_json, nullptr, source};
  check_profile_on(model_profile(config, src), placement.device, source);
  WeightLoader loader(source + " (dummy weights, " + std::string(dtype_name(dtype)) + ")", dtype, seed, placement);
  return family.make(config, src, loader);
}

}  // namespace corvid
