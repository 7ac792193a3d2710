#include "corvid/tokenizer/wordpiece.h"

#include <unicode/uchar.h>

#include "corvid/tokenizer/unicode.h"

namespace corvid::tok {

namespace {

// Rust char boundaries of `word` (byte offsets of each character, then its size).
std::vector<size_t> char_starts(std::string_view word) {
  std::vector<size_t> starts;
  uint32_t cp = 0;
  for (size_t i = 0; i < word.size(); i += utf8_next(word, i, &cp)) starts.push_back(i);
  starts.push_back(word.size());
  return starts;
}

// HF's BERT pieces read general categories from tables of Unicode 8.0 (the
// unicode_categories crate): a character assigned later has no category there, so it
// is neither punctuation, control nor a nonspacing mark. Checked against the oracle.
int8_t category_in_unicode_8(uint32_t cp) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(cp), age);
  return age[0] > 8 ? static_cast<int8_t>(U_UNASSIGNED) : u_charType(static_cast<UChar32>(cp));
}

// HF's is_control: \t \n \r are whitespace, not control; otherwise Cc, Cf, Co and Cs
// (unassigned characters stay).
bool is_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const int8_t t = category_in_unicode_8(cp);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR;
}

// The CJK Unified Ideographs blocks BERT pads with spaces (not Hangul or kana).
bool is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

bool is_bert_punctuation(uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  switch (category_in_unicode_8(cp)) {
    case U_CONNECTOR_PUNCTUATION: case U_DASH_PUNCTUATION: case U_START_PUNCTUATION: case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION: case U_FINAL_PUNCTUATION: case U_OTHER_PUNCTUATION: return true;
    default: return false;
  }
}

void wordpiece_encode(const BpeModel& vocab, const WordPieceOptions& o, std::string_view word,
                      std::vector<int32_t>& out) {
  const std::vector<size_t> starts = char_starts(word);
  const size_t chars = starts.size() - 1;
  if (chars == 0) return;
  if (chars > o.max_chars) {
    if (o.unk_id >= 0) out.push_back(o.unk_id);
    return;
  }
  const size_t first = out.size();
  std::string piece;
  for (size_t s = 0; s < chars;) {
    int32_t found = -1;
    size_t e = chars;
    for (; e > s; --e) {
      piece.assign(s > 0 ? o.prefix : std::string());
      piece.append(word.substr(starts[s], starts[e] - starts[s]));
      found = vocab.find(piece);
      if (found >= 0) break;
    }
    if (found < 0) {  // no split: the whole word is unknown
      out.resize(first);
      if (o.unk_id >= 0) out.push_back(o.unk_id);
      return;
    }
    out.push_back(found);
    s = e;
  }
}

std::string bert_normalize(std::string_view text, const BertNormalization& o) {
  std::string s;
  s.reserve(text.size());
  uint32_t cp = 0;
  for (size_t i = 0, n = 0; i < text.size(); i += n) {
    n = utf8_next(text, i, &cp);
    if (o.clean_text) {
      if (cp == 0 || cp == kReplacementChar || is_control(cp)) continue;
      if (is_whitespace(cp)) cp = ' ';
    }
    if (o.chinese && is_cjk(cp)) {
      s += ' ';
      utf8_append(s, cp);
      s += ' ';
      continue;
    }
    utf8_append(s, cp);
  }
  if (o.strip_accents) {
    const std::string nfd = normalize_unicode(s, NormalForm::NFD);
    s.clear();
    for (size_t i = 0, n = 0; i < nfd.size(); i += n) {
      n = utf8_next(nfd, i, &cp);
      if (category_in_unicode_8(cp) != U_NON_SPACING_MARK) utf8_append(s, cp);
    }
  }
  return s;
}

}  // namespace corvid::tok
