#include "corvid/formats/model_files.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "corvid/core/error.h"
#include "corvid/formats/gguf_model.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/multimodal_text.h"
#include "corvid/formats/safetensors.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A file is GGUF by extension or, failing that, by its magic (renamed downloads).
bool looks_like_gguf(const std::string& path) {
  if (fs::path(path).extension() == ".gguf") return true;
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

ModelFiles open_gguf(const std::string& path, const ConfigResolver& resolve) {
  ModelFiles m;
  m.path = path;
  m.gguf = GgufFile::open(path);
  ResolvedConfig r = resolve(nullptr, m.gguf.get(), path);
  m.config = std::move(r.config);
  m.weights = gguf_weight_set(m.gguf, r.gguf_names);
  return m;
}

ModelFiles open_folder(const std::string& dir, const ConfigResolver& resolve) {
  ModelFiles m;
  m.path = dir;
  const fs::path d(dir);
  const std::string config = (d / "config.json").string();
  if (!is_file(config)) fail(dir, ": no config.json (not a Hugging Face model folder)");
  m.config_json = read_json_file(config);
  m.multimodal_wrapper = multimodal_wrapper(m.config_json);
  if (!m.multimodal_wrapper.empty()) m.config_json = text_model_config(m.config_json, config);
  m.config = resolve(&m.config_json, nullptr, config).config;
  const std::string gen = (d / "generation_config.json").string();
  if (is_file(gen)) m.generation = parse_generation_config(read_json_file(gen), gen);
  // Check the tokenizer before mapping gigabytes of weights.
  m.tokenizer_json = (d / "tokenizer.json").string();
  if (!is_file(m.tokenizer_json)) fail(dir, ": no tokenizer.json (a tokenizer is required)");
  const std::string tok_config = (d / "tokenizer_config.json").string();
  if (is_file(tok_config)) m.tokenizer_config_json = tok_config;
  m.weights = load_safetensors_checkpoint(dir);
  if (!m.multimodal_wrapper.empty()) m.weights = text_model_weights(std::move(m.weights), &m.tower_tensors);
  return m;
}

}  // namespace

ModelFiles open_model_files(const std::string& path, const ConfigResolver& resolve) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path, ": no such file or directory");
  if (fs::is_directory(st)) return open_folder(path, resolve);
  if (fs::is_regular_file(st) && looks_like_gguf(path)) return open_gguf(path, resolve);
  fail(path, ": not a model (expected a .gguf file or a Hugging Face model folder)");
}

}  // namespace corvid
