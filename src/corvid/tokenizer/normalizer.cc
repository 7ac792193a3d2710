#include "corvid/tokenizer/normalizer.h"

#include <unicode/uchar.h>

namespace corvid::tok {
namespace {

std::string replace_all(std::string_view text, const Regex& pattern, const std::string& content) {
  std::vector<std::pair<size_t, size_t>> matches;
  pattern.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(text.substr(prev, b - prev));
    out += content;
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

// Per code point lowercase (Rust's str::to_lowercase is per char as well,
// apart from final-sigma handling, which no supported tokenizer relies on).
std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    i += utf8_next(text, i, &cp);
    utf8_append(out, static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp))));
  }
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      uint32_t cp;
      size_t n = utf8_next(text, b, &cp);
      if (!is_whitespace(cp)) break;
      b += n;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) --s;
      uint32_t cp;
      utf8_next(text, s, &cp);
      if (!is_whitespace(cp)) break;
      e = s;
    }
  }
  return std::string(text.substr(b, e - b));
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const auto& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::Unicode: s = normalize_unicode(s, step.form); break;
      case NormalizerStep::Kind::Replace: s = replace_all(s, *step.pattern, step.content); break;
      case NormalizerStep::Kind::Prepend:
        // HF prepends only to non-empty text.
        if (!s.empty()) s = step.content + s;
        break;
      case NormalizerStep::Kind::Lowercase: s = lowercase(s); break;
      case NormalizerStep::Kind::Strip: s = strip(s, step.strip_left, step.strip_right); break;
    }
  }
  return s;
}

}  // namespace corvid::tok
