#include "corvid/engine/loaded_model.h"

#include <filesystem>

#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"

namespace corvid {

LoadedModel LoadedModel::load(const std::string& path) {
  LoadedModel m;
  m.files = std::make_unique<ModelFiles>(open_model(path));
  if (m.files->gguf) {
    m.tokenizer = Tokenizer::from_gguf(*m.files->gguf);
  } else {
    m.tokenizer = Tokenizer::from_hf_files(m.files->tokenizer_json, m.files->tokenizer_config_json);
  }
  m.model = std::make_unique<LlamaModel>(m.files->config, m.files->weights);
  return m;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    CORVID_CHECK(fs::exists(dir / "tokenizer.json", ec), path, ": no tokenizer.json (a tokenizer is required)");
    const fs::path config = dir / "tokenizer_config.json";
    return Tokenizer::from_hf_files((dir / "tokenizer.json").string(), fs::exists(config, ec) ? config.string() : "");
  }
  auto gguf = GgufFile::open(path);
  return Tokenizer::from_gguf(*gguf);
}

}  // namespace corvid
