#include "corvid/tokenizer/normalizer.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "corvid/core/error.h"

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

// Lowercases each code point on its own with its full mapping, as HF's
// Lowercase normalizer does (Rust char::to_lowercase): U+0130 -> "i\u0307",
// and no word-final sigma rule (ICU applies that rule to whole strings,
// hence one call per character).
std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    i += utf8_next(text, i, &cp);
    if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
      continue;
    }
    UChar src[2], dst[8];
    int32_t n = 0;
    U16_APPEND_UNSAFE(src, n, static_cast<UChar32>(cp));
    UErrorCode err = U_ZERO_ERROR;
    int32_t m = u_strToLower(dst, 8, src, n, "", &err);
    CORVID_CHECK(U_SUCCESS(err), "tokenizer: lowercasing failed: ", u_errorName(err));
    for (int32_t k = 0; k < m;) {
      UChar32 c;
      U16_NEXT_UNSAFE(dst, k, c);
      utf8_append(out, static_cast<uint32_t>(c));
    }
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
      case NormalizerStep::Kind::Bert:
        s = bert_normalize(s, step.bert);
        if (step.bert.lowercase) s = lowercase(s);
        break;
    }
  }
  return s;
}

}  // namespace corvid::tok
