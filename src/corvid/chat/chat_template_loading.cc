// Finding a model's chat template and special tokens, where transformers finds them.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "corvid/chat/chat_template.h"
#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"

namespace corvid {

using jinja::Json;
namespace fs = std::filesystem;

namespace {

// transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order, with the GGUF key of each id.
constexpr std::pair<const char*, const char*> kSpecialTokens[] = {
    {"bos_token", "tokenizer.ggml.bos_token_id"},     {"eos_token", "tokenizer.ggml.eos_token_id"},
    {"unk_token", "tokenizer.ggml.unknown_token_id"}, {"sep_token", "tokenizer.ggml.separator_token_id"},
    {"pad_token", "tokenizer.ggml.padding_token_id"}, {"cls_token", "tokenizer.ggml.cls_token_id"},
    {"mask_token", "tokenizer.ggml.mask_token_id"},
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  CORVID_CHECK(in, p.string(), ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Json read_json_file(const fs::path& p) {
  try {
    return Json::parse(read_text(p));
  } catch (const Json::exception& e) {
    fail(p.string(), ": invalid JSON (", e.what(), ")");
  }
}

// A token in tokenizer_config.json: "<s>" or an AddedToken object {"content": "<s>", ...}.
std::optional<std::string> token_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

Json hf_special_tokens(const fs::path& dir) {
  Json config = fs::exists(dir / "tokenizer_config.json") ? read_json_file(dir / "tokenizer_config.json") : Json();
  Json legacy = fs::exists(dir / "special_tokens_map.json") ? read_json_file(dir / "special_tokens_map.json") : Json();
  Json out = Json::object();
  for (const auto& [name, gguf_key] : kSpecialTokens) {
    (void)gguf_key;
    std::optional<std::string> text;
    if (config.is_object() && config.contains(name)) text = token_text(config[name]);
    if (!text && legacy.is_object() && legacy.contains(name)) text = token_text(legacy[name]);
    if (text) out[name] = *text;
  }
  return out;
}

Json gguf_special_tokens(const GgufFile& gguf) {
  Json out = Json::object();
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  const auto* vocab = tokens ? std::get_if<GgufArray>(&tokens->value) : nullptr;
  if (!vocab) return out;
  for (const auto& [name, key] : kSpecialTokens) {
    if (!gguf.has(key)) continue;
    const int64_t id = gguf.get_int(key);
    if (id < 0 || static_cast<size_t>(id) >= vocab->size()) continue;
    if (const auto* text = std::get_if<std::string>(&(*vocab)[static_cast<size_t>(id)].value)) out[name] = *text;
  }
  return out;
}

// chat_template.jinja ("default") and additional_chat_templates/<name>.jinja.
std::map<std::string, std::string> hf_template_files(const fs::path& dir) {
  std::map<std::string, std::string> named;
  if (fs::exists(dir / "chat_template.jinja")) named["default"] = read_text(dir / "chat_template.jinja");
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra))
    for (const auto& entry : fs::directory_iterator(extra))
      if (entry.path().extension() == ".jinja") named[entry.path().stem().string()] = read_text(entry.path());
  return named;
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template}.
std::map<std::string, std::string> hf_config_templates(const fs::path& dir) {
  std::map<std::string, std::string> named;
  if (!fs::exists(dir / "tokenizer_config.json")) return named;
  const Json config = read_json_file(dir / "tokenizer_config.json");
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return named;
  const Json& t = config["chat_template"];
  if (t.is_string()) {
    named["default"] = t.get<std::string>();
  } else if (t.is_array()) {
    for (const Json& e : t) {
      CORVID_CHECK(e.is_object() && e.contains("name") && e["name"].is_string() && e.contains("template") &&
                       e["template"].is_string(),
                   (dir / "tokenizer_config.json").string(), ": chat_template list entries need a name and a template");
      named[e["name"].get<std::string>()] = e["template"].get<std::string>();
    }
  } else {
    fail((dir / "tokenizer_config.json").string(), ": chat_template is neither a string nor a list");
  }
  return named;
}

// GGUF: tokenizer.chat_template, plus tokenizer.chat_template.<name> (llama.cpp's named templates).
std::map<std::string, std::string> gguf_templates(const GgufFile& gguf) {
  std::map<std::string, std::string> named;
  const std::string prefix = "tokenizer.chat_template.";
  for (const auto& [key, value] : gguf.metadata()) {
    const auto* text = std::get_if<std::string>(&value.value);
    if (!text) continue;
    if (key == "tokenizer.chat_template") named["default"] = *text;
    else if (key.rfind(prefix, 0) == 0 && key.size() > prefix.size()) named[key.substr(prefix.size())] = *text;
  }
  return named;
}

}  // namespace

Json ChatTemplate::special_tokens_of_model(const std::string& path) {
  if (fs::is_directory(path)) return hf_special_tokens(path);
  return gguf_special_tokens(*GgufFile::open(path));
}

ChatTemplate ChatTemplate::from_model(const std::string& path) {
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    std::map<std::string, std::string> named = hf_template_files(dir);  // these win over the config, as in transformers
    if (named.empty()) named = hf_config_templates(dir);
    CORVID_CHECK(!named.empty(), path, ": no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json)");
    return ChatTemplate(named, hf_special_tokens(dir));
  }
  auto gguf = GgufFile::open(path);
  std::map<std::string, std::string> named = gguf_templates(*gguf);
  CORVID_CHECK(!named.empty(), path, ": no chat template (no tokenizer.chat_template in the GGUF metadata)");
  return ChatTemplate(named, gguf_special_tokens(*gguf));
}

}  // namespace corvid
