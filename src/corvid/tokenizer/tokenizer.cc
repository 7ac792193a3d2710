#include "corvid/tokenizer/tokenizer.h"

#include <algorithm>

#include "corvid/tokenizer/tokenizer_impl.h"

namespace corvid {

void Tokenizer::Impl::finalize() {
  const auto& vocab = model.tokens();
  size_t n = vocab.size();
  for (const auto& t : added) n = std::max(n, static_cast<size_t>(t.id) + 1);
  id_text.assign(n, nullptr);
  special.assign(n, false);
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (!vocab[i].empty()) id_text[i] = &vocab[i];
  }
  added_ids.clear();
  for (const auto& t : added) {
    id_text[t.id] = &t.content;  // `added` is not modified after this
    special[t.id] = special[t.id] || t.special;
    added_ids.emplace(t.content, t.id);
  }
  raw_tokens.clear();
  normalized_tokens.clear();
  for (const auto& t : added) {
    // Input is valid UTF-8 by the time it is matched; a token that is not (possible in a GGUF vocabulary)
    // could only match inside a character and split it.
    if (tok::utf8_valid(t.content)) (t.normalized ? normalized_tokens : raw_tokens).push_back(t);
  }
  // The matchers keep pointers into these vectors, which stay untouched from here on.
  raw_matcher.build(raw_tokens);
  normalized_matcher.build(normalized_tokens);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  const std::string clean = tok::utf8_sanitize(text);
  std::vector<int32_t> ids;
  ids.reserve(clean.size() / 3 + 4);
  if (add_special_tokens) ids = m.prefix_ids;

  std::vector<tok::TextPiece> pieces, sub;
  std::vector<std::string> words;
  m.raw_matcher.split(clean, pieces);
  for (const auto& p : pieces) {
    if (p.token_id >= 0) {
      ids.push_back(p.token_id);
      continue;
    }
    std::string_view raw(clean.data() + p.begin, p.end - p.begin);
    const std::string norm = m.normalizer.empty() ? std::string(raw) : m.normalizer.apply(raw);
    sub.clear();
    m.normalized_matcher.split(norm, sub);
    for (const auto& q : sub) {
      if (q.token_id >= 0) {
        ids.push_back(q.token_id);
        continue;
      }
      std::string_view piece(norm.data() + q.begin, q.end - q.begin);
      if (m.pre_tokenizer.empty()) {
        m.encode_word(piece, ids);
        continue;
      }
      words.clear();
      m.pre_tokenizer.split(piece, p.begin == 0 && q.begin == 0, words);
      for (const auto& w : words) m.encode_word(w, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  StreamingDetokenizer stream(*this, skip_special_tokens);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  out += stream.flush();
  return out;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_text.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->eos_ids; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad_id; }
bool Tokenizer::adds_bos() const {
  return impl_->bos_id && !impl_->prefix_ids.empty() && impl_->prefix_ids.front() == *impl_->bos_id;
}
const std::string& Tokenizer::source() const { return impl_->source; }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->find(token); }

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* text = impl_->text_of(id);
  return text ? *text : std::string();
}

Tokenizer::VocabSpelling Tokenizer::vocab_spelling() const {
  using tok::DecoderStep;
  VocabSpelling v;
  for (const DecoderStep& step : impl_->decoder.steps()) {
    switch (step.kind) {
      case DecoderStep::Kind::ByteLevel:
        v.kind = VocabSpelling::Kind::ByteLevel;
        break;
      case DecoderStep::Kind::ByteFallback:
        v.kind = VocabSpelling::Kind::ByteFallback;
        break;
      case DecoderStep::Kind::Metaspace:
        if (v.kind == VocabSpelling::Kind::Raw) v.kind = VocabSpelling::Kind::ByteFallback;  // "▁" spaces
        v.prefix_space = v.prefix_space || step.prepend;
        break;
      case DecoderStep::Kind::Strip:
        v.prefix_space = v.prefix_space || step.strip_start > 0;
        break;
      default:
        break;
    }
  }
  return v;
}

std::string Tokenizer::chat_template() const { return impl_->chat_template; }
std::string Tokenizer::bos_token() const { return impl_->bos_token; }
std::string Tokenizer::eos_token() const { return impl_->eos_token; }

// ---- StreamingDetokenizer ----

struct StreamingDetokenizer::State {
  explicit State(const tok::Decoder& d) : stream(d) {}
  tok::Decoder::Stream stream;
};

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer),
      skip_special_(skip_special_tokens),
      state_(std::make_unique<State>(tokenizer.impl_->decoder)) {}
StreamingDetokenizer::~StreamingDetokenizer() = default;
StreamingDetokenizer::StreamingDetokenizer(StreamingDetokenizer&&) noexcept = default;
StreamingDetokenizer& StreamingDetokenizer::operator=(StreamingDetokenizer&&) noexcept = default;

std::string StreamingDetokenizer::push(int32_t id) {
  const Tokenizer::Impl& m = *tokenizer_->impl_;
  std::string out;
  // Unknown ids are dropped, as HF's decode does.
  const std::string* text = m.text_of(id);
  if (!text) return out;
  if (skip_special_ && m.special[id]) return out;
  state_->stream.push(*text, out);
  return out;
}

void StreamingDetokenizer::prime(std::span<const int32_t> ids) {
  for (int32_t id : ids) (void)push(id);
}

std::string StreamingDetokenizer::flush() {
  std::string out;
  state_->stream.finish(out);
  state_ = std::make_unique<State>(tokenizer_->impl_->decoder);
  return out;
}

}  // namespace corvid
