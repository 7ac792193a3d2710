#include "corvid/template/jinja_unicode.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "corvid/core/utf8.h"

namespace corvid::jinja::unicode {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // surrogateescape: byte b <-> U+DC00+b (b >= 0x80)

bool is_escaped_byte(char32_t c) { return c >= 0xDC80 && c <= 0xDCFF; }

// Maps the valid text with `map_run` and keeps escaped bytes as they are.
template <class Map>
std::string map_runs(std::string_view utf8, Map map_run) {
  const std::u32string cps = decode(utf8);
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= cps.size(); ++i) {
    if (i < cps.size() && !is_escaped_byte(cps[i])) continue;
    if (i > start) {
      icu::UnicodeString text = icu::UnicodeString::fromUTF32(
          reinterpret_cast<const UChar32*>(cps.data() + start), static_cast<int32_t>(i - start));
      map_run(text);
      text.toUTF8String(out);
    }
    if (i < cps.size()) append(out, cps[i]);
    start = i + 1;
  }
  return out;
}

// Titlecases the first code point of `word` and lowercases the rest, where the
// lowercasing sees the whole word (Greek final sigma depends on what precedes).
void title_word(icu::UnicodeString& word) {
  if (word.isEmpty()) return;
  const int32_t first_len = U16_LENGTH(word.char32At(0));
  icu::UnicodeString first(word, 0, first_len);
  icu::UnicodeString first_lower(first);
  first_lower.toLower(icu::Locale::getRoot());
  icu::UnicodeString rest(word);
  rest.toLower(icu::Locale::getRoot());
  rest.remove(0, first_lower.length());
  first.toTitle(nullptr, icu::Locale::getRoot());
  word = first + rest;
}

}  // namespace

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const std::size_t len = utf8::decode(s, i, &cp);
    // An ill-formed byte is escaped alone; decoding resumes at the next byte.
    out.push_back(len ? cp : kEscapeBase + static_cast<unsigned char>(s[i]));
    i += len ? len : 1;
  }
  return out;
}

void append(std::string& out, char32_t c) {
  if (is_escaped_byte(c)) {
    out.push_back(static_cast<char>(c - kEscapeBase));
  } else {
    utf8::append(out, c);
  }
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append(out, c);
  return out;
}

std::size_t length(std::string_view utf8) {
  bool ascii = true;
  for (char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  return ascii ? utf8.size() : decode(utf8).size();
}

std::string upper(std::string_view s) {
  return map_runs(s, [](icu::UnicodeString& t) { t.toUpper(icu::Locale::getRoot()); });
}

std::string lower(std::string_view s) {
  return map_runs(s, [](icu::UnicodeString& t) { t.toLower(icu::Locale::getRoot()); });
}

std::string capitalize(std::string_view s) { return map_runs(s, title_word); }

std::string casefold(std::string_view s) {
  return map_runs(s, [](icu::UnicodeString& t) { t.foldCase(U_FOLD_CASE_DEFAULT); });
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (char32_t c : decode(s)) {
    std::string one;
    append(one, c);
    out += is_upper(c) ? lower(one) : is_lower(c) ? upper(one) : one;
  }
  return out;
}

std::string title(std::string_view s) {
  // Python: a cased character is titlecased when the previous one is uncased,
  // lowercased otherwise. Each word (titlecased char + the run after it) is
  // mapped whole so that lowercasing sees its context.
  const std::u32string cps = decode(s);
  std::string out;
  std::size_t i = 0;
  while (i < cps.size()) {
    if (!is_cased(cps[i])) {
      append(out, cps[i++]);
      continue;
    }
    std::size_t end = i + 1;
    while (end < cps.size() && is_cased(cps[end - 1]) && is_cased(cps[end])) ++end;
    out += map_runs(encode(std::u32string_view(cps).substr(i, end - i)), title_word);
    i = end;
  }
  return out;
}

bool is_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
  if (c < 0x80 || is_escaped_byte(c)) return false;
  if (u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR) return true;
  const auto bidi = u_charDirection(static_cast<UChar32>(c));
  return bidi == U_WHITE_SPACE_NEUTRAL || bidi == U_BLOCK_SEPARATOR || bidi == U_SEGMENT_SEPARATOR;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_cased(char32_t c) {
  return !is_escaped_byte(c) && u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}
bool is_upper(char32_t c) {
  return !is_escaped_byte(c) && u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_UPPERCASE);
}
bool is_lower(char32_t c) {
  return !is_escaped_byte(c) && u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_LOWERCASE);
}

bool is_titlecase(char32_t c) {
  return !is_escaped_byte(c) && u_charType(static_cast<UChar32>(c)) == U_TITLECASE_LETTER;
}

bool is_alpha(char32_t c) {
  if (is_escaped_byte(c)) return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

bool is_decimal(char32_t c) {
  return !is_escaped_byte(c) && u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

bool is_digit(char32_t c) {
  if (is_escaped_byte(c)) return false;
  const auto type = u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
  return type == U_NT_DECIMAL || type == U_NT_DIGIT;
}

bool is_numeric(char32_t c) {
  if (is_escaped_byte(c)) return false;
  return u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

int decimal_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c < 0x80 || !is_decimal(c)) return -1;
  return u_charDigitValue(static_cast<UChar32>(c));
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (is_escaped_byte(c)) return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

}  // namespace corvid::jinja::unicode
