// Loads a Hugging Face tokenizer.json (+ tokenizer_config.json) into the
// pipeline of tokenizer_impl.h. Every component type corvid does not
// implement is rejected with a message naming the file and the type, so an
// unsupported tokenizer fails at load instead of producing wrong ids.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "corvid/core/error.h"
#include "corvid/tokenizer/tokenizer_impl.h"

namespace corvid {
namespace {

// A JSON type of this file's own (long long integers): its parser is compiled
// with -O2 even in Debug builds (see CMakeLists.txt), and a distinct type keeps
// the linker from swapping in unoptimized nlohmann::json code from other files.
using json = nlohmann::basic_json<std::map, std::vector, std::string, bool, long long, unsigned long long, double>;
using tok::DecoderStep;
using tok::NormalizerStep;
using tok::PreTokenizerStep;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CORVID_CHECK(in, path, ": cannot open");
  in.seekg(0, std::ios::end);
  std::string text(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  CORVID_CHECK(in, path, ": read failed");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

// {"String": s} is a literal, {"Regex": r} an Oniguruma-style pattern.
std::shared_ptr<const tok::Regex> pattern_of(const json& p, const std::string& where) {
  if (p.contains("String")) {
    return std::make_shared<tok::Regex>(tok::regex_escape(p.at("String").get<std::string>()), where);
  }
  if (p.contains("Regex")) {
    return std::make_shared<tok::Regex>(tok::translate_hf_regex(p.at("Regex").get<std::string>()), where);
  }
  fail(where, ": pattern is neither String nor Regex");
}

void load_normalizer(const json& j, const std::string& path, tok::Normalizer& out) {
  if (j.is_null()) return;
  const std::string type = j.at("type").get<std::string>();
  NormalizerStep step;
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) load_normalizer(n, path, out);
    return;
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.kind = NormalizerStep::Kind::Unicode;
    step.form = type == "NFC"    ? tok::NormalForm::NFC
                : type == "NFD"  ? tok::NormalForm::NFD
                : type == "NFKC" ? tok::NormalForm::NFKC
                                 : tok::NormalForm::NFKD;
  } else if (type == "Replace") {
    step.kind = NormalizerStep::Kind::Replace;
    step.pattern = pattern_of(j.at("pattern"), path + ": normalizer Replace");
    step.content = j.at("content").get<std::string>();
  } else if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::Prepend;
    step.content = j.at("prepend").get<std::string>();
  } else if (type == "Lowercase") {
    step.kind = NormalizerStep::Kind::Lowercase;
  } else if (type == "Strip") {
    step.kind = NormalizerStep::Kind::Strip;
    step.strip_left = j.value("strip_left", true);
    step.strip_right = j.value("strip_right", true);
  } else if (type == "BertNormalizer") {
    step.kind = NormalizerStep::Kind::Bert;
    step.bert.clean_text = j.value("clean_text", true);
    step.bert.chinese = j.value("handle_chinese_chars", true);
    step.bert.lowercase = j.value("lowercase", true);
    // Unset: as lowercase (HF).
    const json accents = j.value("strip_accents", json());
    step.bert.strip_accents = accents.is_boolean() ? accents.get<bool>() : step.bert.lowercase;
  } else {
    fail(path, ": unsupported normalizer type ", type,
         " (supported: Sequence, NFC, NFD, NFKC, NFKD, Replace, Prepend, Lowercase, Strip, BertNormalizer)");
  }
  out.add(std::move(step));
}

tok::SplitBehavior behavior_of(const std::string& b, const std::string& path) {
  if (b == "Isolated") return tok::SplitBehavior::Isolated;
  if (b == "Removed") return tok::SplitBehavior::Removed;
  if (b == "MergedWithPrevious") return tok::SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return tok::SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return tok::SplitBehavior::Contiguous;
  fail(path, ": unknown split behavior ", b);
}

std::shared_ptr<const tok::Regex> regex(const std::string& hf_pattern, const std::string& where) {
  return std::make_shared<tok::Regex>(tok::translate_hf_regex(hf_pattern), where);
}

void load_pre_tokenizer(const json& j, const std::string& path, tok::PreTokenizer& out) {
  if (j.is_null()) return;
  const std::string type = j.at("type").get<std::string>();
  PreTokenizerStep step;
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers")) load_pre_tokenizer(p, path, out);
    return;
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::Split;
    step.pattern = pattern_of(j.at("pattern"), path + ": pre_tokenizer Split");
    step.behavior = behavior_of(j.at("behavior").get<std::string>(), path);
    step.invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::ByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", true);
    if (j.value("use_regex", true)) step.pattern = regex(tok::kGpt2Pattern, path + ": ByteLevel");
  } else if (type == "Digits") {
    step.kind = PreTokenizerStep::Kind::Split;
    // Rust's char::is_numeric is the N* categories.
    bool individual = j.value("individual_digits", false);
    step.pattern = regex(individual ? "\\p{N}" : "\\p{N}+", path + ": Digits");
    step.behavior = tok::SplitBehavior::Isolated;
  } else if (type == "Whitespace") {
    // Keeps runs of word characters and runs of other non-space characters.
    step.kind = PreTokenizerStep::Kind::Split;
    step.pattern = regex("\\w+|[^\\w\\s]+", path + ": Whitespace");
    step.behavior = tok::SplitBehavior::Removed;
    step.invert = true;
  } else if (type == "WhitespaceSplit") {
    step.kind = PreTokenizerStep::Kind::Split;
    step.pattern = regex("\\s+", path + ": WhitespaceSplit");
    step.behavior = tok::SplitBehavior::Removed;
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::Metaspace;
    step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
    step.add_prefix_space = scheme != "never";
    step.prepend_first_only = scheme == "first";
    step.split = j.value("split", true);
    step.pattern = std::make_shared<tok::Regex>(tok::regex_escape(step.replacement), path + ": Metaspace");
  } else if (type == "BertPreTokenizer") {
    // Whitespace splits and goes; each punctuation character is a word of its own.
    step.kind = PreTokenizerStep::Kind::Split;
    step.pattern = regex("\\s+", path + ": BertPreTokenizer");
    step.behavior = tok::SplitBehavior::Removed;
    out.add(step);
    step = PreTokenizerStep();
    step.kind = PreTokenizerStep::Kind::BertPunctuation;
  } else {
    fail(path, ": unsupported pre_tokenizer type ", type,
         " (supported: Sequence, Split, ByteLevel, Digits, Whitespace, WhitespaceSplit, Metaspace, BertPreTokenizer)");
  }
  out.add(std::move(step));
}

void load_decoder(const json& j, const std::string& path, tok::Decoder& out) {
  if (j.is_null()) return;
  const std::string type = j.at("type").get<std::string>();
  DecoderStep step;
  if (type == "Sequence") {
    for (const auto& d : j.at("decoders")) load_decoder(d, path, out);
    return;
  } else if (type == "ByteLevel") {
    step.kind = DecoderStep::Kind::ByteLevel;
  } else if (type == "Replace") {
    step.kind = DecoderStep::Kind::Replace;
    step.pattern = pattern_of(j.at("pattern"), path + ": decoder Replace");
    step.content = j.at("content").get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::Fuse;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::Strip;
    step.content = j.at("content").get<std::string>();
    step.strip_start = j.value("start", size_t{0});
    step.strip_stop = j.value("stop", size_t{0});
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Kind::Metaspace;
    step.content = j.value("replacement", std::string("\xE2\x96\x81"));
    std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
    step.prepend = scheme != "never";
  } else if (type == "WordPiece") {
    step.kind = DecoderStep::Kind::WordPiece;
    step.content = j.value("prefix", std::string("##"));
    step.cleanup = j.value("cleanup", true);
  } else {
    fail(path, ": unsupported decoder type ", type,
         " (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece)");
  }
  out.add(std::move(step));
}

// Collects the ids a post-processor puts around a single sequence.
void load_post_processor(const json& j, const std::string& path, Tokenizer::Impl& m) {
  if (j.is_null()) return;
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) load_post_processor(p, path, m);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets.
  } else if (type == "TemplateProcessing") {
    const json& specials = j.at("special_tokens");
    bool after = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      CORVID_CHECK(specials.contains(name), path, ": post_processor template names unknown token ", name);
      auto& dest = after ? m.suffix_ids : m.prefix_ids;
      for (const auto& id : specials.at(name).at("ids")) dest.push_back(id.get<int32_t>());
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    m.prefix_ids.push_back(j.at("cls").at(1).get<int32_t>());
    m.suffix_ids.push_back(j.at("sep").at(1).get<int32_t>());
  } else {
    fail(path, ": unsupported post_processor type ", type,
         " (supported: Sequence, ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing)");
  }
}

std::vector<std::string> vocab_tokens(const json& vocab, const std::string& path) {
  std::vector<std::string> tokens;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    int64_t id = it.value().get<int64_t>();
    CORVID_CHECK(id >= 0 && id < (1 << 24), path, ": vocab id ", id, " out of range for ", it.key());
    if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
    tokens[id] = it.key();
  }
  return tokens;
}

void load_wordpiece(const json& j, const std::string& path, Tokenizer::Impl& m) {
  m.model.set_vocab(vocab_tokens(j.at("vocab"), path));
  tok::WordPieceOptions opt;
  const std::string unk = j.value("unk_token", std::string("[UNK]"));
  opt.unk_id = m.model.find(unk);
  CORVID_CHECK(opt.unk_id >= 0, path, ": WordPiece unk_token ", unk, " is not in the vocab");
  opt.prefix = j.value("continuing_subword_prefix", std::string("##"));
  opt.max_chars = j.value("max_input_chars_per_word", size_t{100});
  m.wordpiece = opt;
}

void load_model(const json& j, const std::string& path, Tokenizer::Impl& m) {
  const std::string type = j.value("type", std::string("BPE"));
  if (type == "WordPiece") return load_wordpiece(j, path, m);
  CORVID_CHECK(type == "BPE", path, ": unsupported model type ", type, " (supported: BPE, WordPiece)");
  std::vector<std::string> tokens = vocab_tokens(j.at("vocab"), path);
  tok::BpeOptions opt;
  opt.byte_fallback = j.value("byte_fallback", false);
  opt.fuse_unk = j.value("fuse_unk", false);
  opt.ignore_merges = j.value("ignore_merges", false);
  if (j.contains("continuing_subword_prefix") && j["continuing_subword_prefix"].is_string()) {
    opt.continuing_subword_prefix = j["continuing_subword_prefix"].get<std::string>();
  }
  if (j.contains("end_of_word_suffix") && j["end_of_word_suffix"].is_string()) {
    opt.end_of_word_suffix = j["end_of_word_suffix"].get<std::string>();
  }
  CORVID_CHECK(j.value("dropout", json()).is_null() || j["dropout"].get<double>() == 0.0, path,
               ": BPE dropout is not supported");
  m.model.set_vocab(std::move(tokens));
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    opt.unk_id = m.model.find(j["unk_token"].get<std::string>());
  }
  m.model.set_options(opt);

  int32_t rank = 0;
  for (const auto& merge : j.at("merges")) {
    std::string_view a, b;
    if (merge.is_string()) {
      // "a b": tokens in this form never contain a space.
      std::string_view s = merge.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      CORVID_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, path, ": bad merge \"", s,
                   "\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      CORVID_CHECK(merge.is_array() && merge.size() == 2, path, ": bad merge ", merge.dump());
      a = merge[0].get_ref<const std::string&>();
      b = merge[1].get_ref<const std::string&>();
    }
    CORVID_CHECK(m.model.add_merge(a, b, rank), path, ": merge \"", a, " ", b, "\" uses a token not in the vocab");
    ++rank;
  }
}

// "<s>" or {"content": "<s>", ...} or null.
std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

void load_config(const std::string& path, Tokenizer::Impl& m) {
  json c = read_json(path);
  try {
    if (c.contains("chat_template")) {
      const json& t = c["chat_template"];
      if (t.is_string()) {
        m.chat_template = t.get<std::string>();
      } else if (t.is_array()) {
        // Named templates: use "default" (the one transformers picks without a name).
        for (const auto& e : t) {
          if (e.value("name", std::string()) == "default") m.chat_template = e.value("template", std::string());
        }
      }
    }
    if (c.contains("bos_token")) m.bos_token = token_text(c["bos_token"]);
    if (c.contains("eos_token")) m.eos_token = token_text(c["eos_token"]);
    if (c.contains("pad_token")) {
      if (auto id = m.find(token_text(c["pad_token"]))) m.pad_id = id;
    }
  } catch (const json::exception& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_files(const std::string& tokenizer_json_path,
                                                    const std::string& tokenizer_config_json_path) {
  const std::string& path = tokenizer_json_path;
  auto m = std::make_unique<Impl>();
  m->source = path;
  {
    json j = read_json(path);
    try {
      for (const auto& a : j.value("added_tokens", json::array())) {
        tok::AddedToken t;
        t.id = a.at("id").get<int32_t>();
        CORVID_CHECK(t.id >= 0 && t.id < (1 << 24), path, ": added token id ", t.id, " out of range");
        t.content = a.at("content").get<std::string>();
        t.special = a.value("special", false);
        t.lstrip = a.value("lstrip", false);
        t.rstrip = a.value("rstrip", false);
        t.single_word = a.value("single_word", false);
        t.normalized = a.value("normalized", !t.special);
        m->added.push_back(std::move(t));
      }
      load_model(j.at("model"), path, *m);
      load_normalizer(j.value("normalizer", json()), path, m->normalizer);
      load_pre_tokenizer(j.value("pre_tokenizer", json()), path, m->pre_tokenizer);
      load_post_processor(j.value("post_processor", json()), path, *m);
      load_decoder(j.value("decoder", json()), path, m->decoder);
    } catch (const json::exception& e) {
      fail(path, ": ", e.what());
    }
  }
  m->finalize();
  if (!tokenizer_config_json_path.empty()) load_config(tokenizer_config_json_path, *m);

  // BOS: the config's bos_token, else the first id the post-processor prepends.
  if (!m->bos_token.empty()) {
    m->bos_id = m->find(m->bos_token);
  } else if (!m->prefix_ids.empty()) {
    m->bos_id = m->prefix_ids.front();
    if (const std::string* t = m->text_of(*m->bos_id)) m->bos_token = *t;
  }
  if (!m->eos_token.empty()) {
    auto id = m->find(m->eos_token);
    CORVID_CHECK(id.has_value(), tokenizer_config_json_path, ": eos_token ", m->eos_token, " is not in ", path);
    m->eos_ids.push_back(*id);
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(m)));
}

}  // namespace corvid
