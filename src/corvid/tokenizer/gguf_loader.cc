// Builds a Tokenizer from the vocabulary stored in a GGUF file.
//
// tokenizer.ggml.model "gpt2": byte-level BPE with ranked merges; the
// pre-tokenizer is named by tokenizer.ggml.pre and mapped here to the regexes
// of the Hugging Face tokenizer.json it was converted from (llama.cpp keeps
// hand-adapted copies of the same patterns).
// tokenizer.ggml.model "llama": SentencePiece; pieces are merged by score,
// characters missing from the vocabulary become <0xNN> byte tokens, and a
// space is prefixed to each run of text (add_space_prefix), which is what
// HF's converted Llama tokenizers do too.
// Control and user-defined tokens (tokenizer.ggml.token_type 3 and 4, and
// the unknown token) are matched in the input like HF added tokens.
#include <string_view>

#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "corvid/tokenizer/tokenizer_impl.h"

namespace corvid {
namespace {

enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The pre-tokenizer patterns of the HF tokenizer.json files (Oniguruma syntax; see regex.h).
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// Typed metadata access through GgufFile::metadata(), with messages naming the file and key.
class Meta {
 public:
  explicit Meta(const GgufFile& g) : g_(g) {}
  const GgufValue* find(const std::string& key) const {
    auto it = g_.metadata().find(key);
    return it == g_.metadata().end() ? nullptr : &it->second;
  }
  [[noreturn]] void bad(const std::string& key, const char* what) const { fail(g_.path(), ": ", key, ": ", what); }

  std::string str(const std::string& key, const std::string& fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (auto* s = std::get_if<std::string>(&v->value)) return *s;
    bad(key, "expected a string");
  }
  static std::optional<int64_t> int_of(const GgufValue& v) {
    if (auto* u = std::get_if<uint64_t>(&v.value)) return *u > INT64_MAX ? std::nullopt : std::optional<int64_t>(*u);
    if (auto* i = std::get_if<int64_t>(&v.value)) return *i;
    return std::nullopt;
  }
  std::optional<int64_t> integer(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    auto i = int_of(*v);
    if (!i) bad(key, "expected an integer");
    return i;
  }
  bool boolean(const std::string& key, bool fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (auto* b = std::get_if<bool>(&v->value)) return *b;
    bad(key, "expected a bool");
  }
  const GgufArray* array(const std::string& key, bool required) const {
    const GgufValue* v = find(key);
    if (!v) {
      if (required) bad(key, "missing");
      return nullptr;
    }
    if (auto* a = std::get_if<GgufArray>(&v->value)) return a;
    bad(key, "expected an array");
  }
  const std::string& path() const { return g_.path(); }

 private:
  const GgufFile& g_;
};

tok::PreTokenizerStep split_step(const char* hf_pattern, const std::string& where) {
  tok::PreTokenizerStep s;
  s.kind = tok::PreTokenizerStep::Kind::Split;
  s.pattern = std::make_shared<tok::Regex>(tok::translate_hf_regex(hf_pattern), where);
  s.behavior = tok::SplitBehavior::Isolated;
  return s;
}

tok::PreTokenizerStep byte_level_step(bool gpt2_regex, const std::string& where) {
  tok::PreTokenizerStep s;
  s.kind = tok::PreTokenizerStep::Kind::ByteLevel;
  if (gpt2_regex) s.pattern = std::make_shared<tok::Regex>(tok::translate_hf_regex(tok::kGpt2Pattern), where);
  return s;
}

// Pre-tokenizer (and the flags that go with it) for a tokenizer.ggml.pre name.
// Returns the default of add_bos for that family.
bool setup_gpt2_pre(const std::string& pre, const Meta& meta, Tokenizer::Impl& m, tok::BpeOptions& opt) {
  const std::string where = meta.path() + ": tokenizer.ggml.pre " + pre;
  auto is = [&](std::initializer_list<std::string_view> names) {
    for (auto n : names) {
      if (pre == n) return true;
    }
    return false;
  };
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    m.pre_tokenizer.add(split_step(kLlama3Pattern, where));
    m.pre_tokenizer.add(byte_level_step(false, where));
    opt.ignore_merges = true;  // Llama 3's tokenizer.json sets ignore_merges
    return true;
  }
  if (is({"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"})) {
    // Qwen2/Qwen3 tokenizer.json normalizes to NFC before splitting.
    tok::NormalizerStep nfc;
    nfc.kind = tok::NormalizerStep::Kind::Unicode;
    nfc.form = tok::NormalForm::NFC;
    m.normalizer.add(std::move(nfc));
    m.pre_tokenizer.add(split_step(kQwen2Pattern, where));
    m.pre_tokenizer.add(byte_level_step(false, where));
    return false;
  }
  if (is({"qwen35"})) {
    m.pre_tokenizer.add(split_step(kQwen35Pattern, where));
    m.pre_tokenizer.add(byte_level_step(false, where));
    return false;
  }
  if (is({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    // HF: Sequence[Digits(individual_digits), ByteLevel(use_regex)].
    m.pre_tokenizer.add(split_step("\\p{N}", where));
    m.pre_tokenizer.add(byte_level_step(true, where));
    return false;
  }
  if (is({"default", "gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "exaone4"})) {
    m.pre_tokenizer.add(byte_level_step(true, where));
    return false;
  }
  fail(meta.path(), ": unsupported tokenizer.ggml.pre '", pre,
       "' (supported: default, gpt-2, llama-bpe/llama3, qwen2, qwen35, smollm/starcoder, and aliases)");
}

tok::DecoderStep decoder_step(tok::DecoderStep::Kind kind) {
  tok::DecoderStep s;
  s.kind = kind;
  return s;
}

void spm_pipeline(bool add_space_prefix, const std::string& where, Tokenizer::Impl& m) {
  const std::string space_mark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
  if (add_space_prefix) {
    tok::NormalizerStep prepend;
    prepend.kind = tok::NormalizerStep::Kind::Prepend;
    prepend.content = space_mark;
    m.normalizer.add(std::move(prepend));
  }
  tok::NormalizerStep replace;
  replace.kind = tok::NormalizerStep::Kind::Replace;
  replace.pattern = std::make_shared<tok::Regex>(" ", where);
  replace.content = space_mark;
  m.normalizer.add(std::move(replace));

  tok::DecoderStep d;
  d.kind = tok::DecoderStep::Kind::Replace;
  d.pattern = std::make_shared<tok::Regex>(tok::regex_escape(space_mark), where);
  d.content.assign(1, ' ');  // (assigning " " trips a GCC 12 -Wrestrict false positive)
  m.decoder.add(d);
  m.decoder.add(decoder_step(tok::DecoderStep::Kind::ByteFallback));
  m.decoder.add(decoder_step(tok::DecoderStep::Kind::Fuse));
  if (add_space_prefix) {
    // HF's Llama decoders strip the one space the encoder prefixed.
    tok::DecoderStep strip = decoder_step(tok::DecoderStep::Kind::Strip);
    strip.content.assign(1, ' ');
    strip.strip_start = 1;
    m.decoder.add(strip);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  Meta meta(gguf);
  const std::string& path = gguf.path();
  auto m = std::make_unique<Impl>();
  m->source = path;

  const std::string model = meta.str("tokenizer.ggml.model", "");
  CORVID_CHECK(model == "gpt2" || model == "llama" || model == "gemma4", path, ": unsupported tokenizer.ggml.model '",
               model, "' (supported: gpt2, llama, gemma4)");

  std::vector<std::string> tokens;
  for (const auto& v : *meta.array("tokenizer.ggml.tokens", true)) {
    auto* s = std::get_if<std::string>(&v.value);
    if (!s) meta.bad("tokenizer.ggml.tokens", "expected strings");
    tokens.push_back(*s);
  }
  const size_t n = tokens.size();
  CORVID_CHECK(n > 0 && n < (1u << 24), path, ": tokenizer.ggml.tokens has ", n, " entries");
  std::vector<int64_t> types(n, kNormal);
  if (const GgufArray* a = meta.array("tokenizer.ggml.token_type", false)) {
    CORVID_CHECK(a->size() == n, path, ": tokenizer.ggml.token_type has ", a->size(), " entries, expected ", n);
    for (size_t i = 0; i < n; ++i) {
      auto t = Meta::int_of((*a)[i]);
      if (!t) meta.bad("tokenizer.ggml.token_type", "expected integers");
      types[i] = *t;
    }
  }
  auto token_id = [&](const std::string& key) -> std::optional<int32_t> {
    auto v = meta.integer(key);
    if (!v || *v < 0 || static_cast<size_t>(*v) >= n) return std::nullopt;  // absent or "none" (e.g. -1 / UINT32_MAX)
    return static_cast<int32_t>(*v);
  };

  for (size_t i = 0; i < n; ++i) {
    if (types[i] == kControl || types[i] == kUserDefined || types[i] == kUnknown) {
      tok::AddedToken t;
      t.content = tokens[i];
      t.id = static_cast<int32_t>(i);
      t.special = types[i] != kUserDefined;
      t.normalized = false;
      m->added.push_back(std::move(t));
    }
  }

  tok::BpeOptions opt;
  bool add_bos_default;
  if (model == "gpt2" || model == "gemma4") {
    if (model == "gpt2") {
      add_bos_default = setup_gpt2_pre(meta.str("tokenizer.ggml.pre", "default"), meta, *m, opt);
      m->decoder.add(decoder_step(tok::DecoderStep::Kind::ByteLevel));
    } else {
      // llama.cpp's Gemma 4 vocabulary: ranked BPE merges over raw UTF-8 (no byte-level
      // map), spaces written as U+2581, the text split into runs of newlines and runs of
      // everything else, <0xXX> tokens for what no token covers, a BOS, no prefix space.
      add_bos_default = true;
      opt.byte_fallback = true;
      m->pre_tokenizer.add(split_step(R"(\n+|[^\n]+)", path));
      spm_pipeline(meta.boolean("tokenizer.ggml.add_space_prefix", false), path, *m);
    }
    m->model.set_options(opt);
    m->model.set_vocab(tokens);
    int32_t rank = 0;
    for (const auto& v : *meta.array("tokenizer.ggml.merges", true)) {
      auto* s = std::get_if<std::string>(&v.value);
      if (!s) meta.bad("tokenizer.ggml.merges", "expected strings");
      size_t sp = s->find(' ', 1);
      CORVID_CHECK(sp != std::string::npos, path, ": bad merge \"", *s, "\"");
      CORVID_CHECK(m->model.add_merge(std::string_view(*s).substr(0, sp), std::string_view(*s).substr(sp + 1), rank),
                   path, ": merge \"", *s, "\" uses a token not in the vocab");
      ++rank;
    }
  } else {
    add_bos_default = true;
    std::vector<float> scores(n, 0.0f);
    if (const GgufArray* a = meta.array("tokenizer.ggml.scores", false)) {
      CORVID_CHECK(a->size() == n, path, ": tokenizer.ggml.scores has ", a->size(), " entries, expected ", n);
      for (size_t i = 0; i < n; ++i) {
        auto* d = std::get_if<double>(&(*a)[i].value);
        if (!d) meta.bad("tokenizer.ggml.scores", "expected floats");
        scores[i] = static_cast<float>(*d);
      }
    }
    // Only ordinary pieces are merge results; control, byte and unused pieces are not.
    std::vector<bool> mergeable(n);
    for (size_t i = 0; i < n; ++i) mergeable[i] = types[i] == kNormal;
    opt.score_merges = true;
    opt.byte_fallback = true;
    if (auto unk = token_id("tokenizer.ggml.unknown_token_id")) opt.unk_id = *unk;
    m->model.set_options(opt);
    m->model.set_vocab(tokens);
    m->model.set_scores(std::move(scores), std::move(mergeable));
    spm_pipeline(meta.boolean("tokenizer.ggml.add_space_prefix", true), path, *m);
  }

  m->bos_id = token_id("tokenizer.ggml.bos_token_id");
  m->pad_id = token_id("tokenizer.ggml.padding_token_id");
  // Generation stops at any of these (end of text, end of turn, end of message).
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = token_id(key)) {
      if (std::find(m->eos_ids.begin(), m->eos_ids.end(), *id) == m->eos_ids.end()) m->eos_ids.push_back(*id);
    }
  }
  if (m->bos_id && meta.boolean("tokenizer.ggml.add_bos_token", add_bos_default)) m->prefix_ids.push_back(*m->bos_id);
  if (!m->eos_ids.empty() && meta.boolean("tokenizer.ggml.add_eos_token", false)) {
    m->suffix_ids.push_back(m->eos_ids.front());
  }
  if (m->bos_id) m->bos_token = tokens[*m->bos_id];
  if (!m->eos_ids.empty()) m->eos_token = tokens[m->eos_ids.front()];
  m->chat_template = meta.str("tokenizer.chat_template", "");
  m->finalize();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(m)));
}

}  // namespace corvid
