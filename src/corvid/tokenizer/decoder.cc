#include "corvid/tokenizer/decoder.h"

#include <algorithm>

namespace corvid::tok {
namespace {

// HF's cleanup of decoded WordPiece text (its clean_up_tokenization): no space before
// . ? ! , and none inside the English contractions it knows.
std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    const std::string f(from), t(to);
    for (size_t at = text.find(f); at != std::string::npos; at = text.find(f, at + t.size())) text.replace(at, f.size(), t);
  }
  return text;
}

// "<0xNN>" -> NN, else -1 (HF ByteFallback's test for a byte token).
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v |= c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v |= c - 'A' + 10;
    } else {
      return -1;
    }
  }
  return v;
}

// Token text in the byte-level alphabet -> raw bytes. A token with any
// character outside the alphabet (an added token such as "<think>\n") is
// taken as its own UTF-8 bytes, as HF does.
std::string from_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    uint32_t cp;
    i += utf8_next(token, i, &cp);
    int b = unicode_to_byte(cp);
    if (b < 0) return std::string(token);
    bytes += static_cast<char>(b);
  }
  return bytes;
}

std::string replace_all(std::string_view text, const Regex& pattern, const std::string& content) {
  std::vector<std::pair<size_t, size_t>> matches;
  pattern.find_all(text, matches);
  std::string out;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(text.substr(prev, b - prev));
    out += content;
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

// Splits UTF-8 into its characters (as string_views).
std::vector<std::string_view> chars_of(std::string_view s) {
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = utf8_next(s, i, &cp);
    chars.push_back(s.substr(i, n));
    i += n;
  }
  return chars;
}

}  // namespace

Decoder::Stream::Stream(const Decoder& decoder) : decoder_(decoder), state_(decoder.steps_.size()) {
  // After Fuse or ByteLevel, later steps see one growing token instead of many.
  bool fused = false;
  for (size_t i = 0; i < state_.size(); ++i) {
    state_[i].fused = fused;
    auto kind = decoder.steps_[i].kind;
    fused |= kind == DecoderStep::Kind::Fuse || kind == DecoderStep::Kind::ByteLevel;
  }
}

void Decoder::Stream::push(std::string_view token, std::string& out) {
  if (decoder_.steps_.empty()) {
    // Without a decoder HF joins the tokens with spaces.
    if (seen_any_) out += ' ';
    seen_any_ = true;
    out.append(token);
    return;
  }
  run(0, std::string(token), out);
}

void Decoder::Stream::run(size_t i, std::string token, std::string& out) {
  const auto& steps = decoder_.steps_;
  if (i == steps.size()) {
    out += token;
    return;
  }
  const DecoderStep& step = steps[i];
  StepState& st = state_[i];
  const bool fused = st.fused;
  size_t index = st.seen++;
  switch (step.kind) {
    case DecoderStep::Kind::ByteLevel: {
      std::string text;
      st.utf8.push(from_byte_level(token), text);
      if (!text.empty()) run(i + 1, std::move(text), out);
      return;
    }
    case DecoderStep::Kind::Replace:
      // Vocabulary text from a GGUF file is not guaranteed to be UTF-8.
      if (!utf8_valid(token)) token = utf8_sanitize(token);
      run(i + 1, replace_all(token, *step.pattern, step.content), out);
      return;
    case DecoderStep::Kind::ByteFallback: {
      int b = parse_byte_token(token);
      if (b >= 0) {
        st.bytes += static_cast<char>(b);
        return;
      }
      flush(i, out);
      run(i + 1, std::move(token), out);
      return;
    }
    case DecoderStep::Kind::Fuse: run(i + 1, std::move(token), out); return;
    case DecoderStep::Kind::Strip: {
      auto chars = chars_of(token);
      size_t b = 0, e = chars.size();
      if (!fused) {
        st.stripped = 0;
        st.start_done = false;
      }
      while (!st.start_done && b < e) {
        if (st.stripped < step.strip_start && chars[b] == step.content) {
          ++b;
          ++st.stripped;
        } else {
          st.start_done = true;
        }
      }
      if (!fused) {
        for (size_t k = 0; k < step.strip_stop && e > b && chars[e - 1] == step.content; ++k) --e;
      }
      std::string text = fused ? std::move(st.held) : std::string();
      st.held.clear();
      for (size_t k = b; k < e; ++k) text.append(chars[k]);
      if (fused && step.strip_stop > 0) {
        // Hold back trailing strip chars: they are removed only if nothing follows.
        auto all = chars_of(text);
        size_t n = all.size(), h = 0;
        while (h < step.strip_stop && h < n && all[n - 1 - h] == step.content) ++h;
        size_t cut = text.size();
        for (size_t k = 0; k < h; ++k) cut -= all[n - 1 - k].size();
        st.held = text.substr(cut);
        text.resize(cut);
      }
      if (!text.empty() || !fused) run(i + 1, std::move(text), out);
      return;
    }
    case DecoderStep::Kind::Metaspace: {
      std::string text;
      for (auto c : chars_of(token)) {
        if (c == step.content) {
          text += ' ';
        } else {
          text.append(c);
        }
      }
      if (step.prepend && index == 0 && !text.empty() && text[0] == ' ') text.erase(0, 1);
      run(i + 1, std::move(text), out);
      return;
    }
    case DecoderStep::Kind::WordPiece: {
      // HF: every token but the first gets a space, unless it continues a word (the
      // prefix, here step.content, is dropped); cleanup then works on each token alone.
      std::string text;
      if (index > 0 && token.rfind(step.content, 0) == 0) {
        text = token.substr(step.content.size());
      } else {
        text = index > 0 ? " " + token : token;
      }
      if (step.cleanup) text = clean_up_tokenization(text);
      run(i + 1, std::move(text), out);
      return;
    }
  }
}

void Decoder::Stream::flush(size_t i, std::string& out) {
  const DecoderStep& step = decoder_.steps_[i];
  StepState& st = state_[i];
  if (step.kind == DecoderStep::Kind::ByteFallback && !st.bytes.empty()) {
    std::string bytes;
    bytes.swap(st.bytes);
    if (utf8_valid(bytes)) {
      run(i + 1, std::move(bytes), out);
    } else {
      for (size_t k = 0; k < bytes.size(); ++k) run(i + 1, "\xEF\xBF\xBD", out);  // one U+FFFD per byte
    }
  } else if (step.kind == DecoderStep::Kind::ByteLevel) {
    std::string text;
    st.utf8.finish(text);
    if (!text.empty()) run(i + 1, std::move(text), out);
  } else if (step.kind == DecoderStep::Kind::Strip) {
    st.held.clear();  // trailing strip chars at the very end are dropped
  }
}

void Decoder::Stream::finish(std::string& out) {
  for (size_t i = 0; i < decoder_.steps_.size(); ++i) flush(i, out);
}

}  // namespace corvid::tok
