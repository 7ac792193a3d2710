#include "corvid/tokenizer/unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <array>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/utf8.h"

namespace corvid::tok {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 324> to_byte;  // the alphabet lies below U+0144
  ByteLevelTables() {
    to_byte.fill(-1);
    // Printable Latin-1 bytes keep their code point; the other 68 bytes are
    // moved, in byte order, to U+0100 onwards (the GPT-2 convention).
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      utf8_append(to_unicode[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

size_t utf8_next(std::string_view s, size_t i, uint32_t* cp) {
  char32_t decoded = 0;
  const size_t len = utf8::decode(s, i, &decoded);
  *cp = len ? static_cast<uint32_t>(decoded) : kReplacementChar;
  return len ? len : 1;
}

void utf8_append(std::string& out, uint32_t cp) { utf8::append(out, cp); }

bool utf8_valid(std::string_view s) { return utf8::is_valid(s); }

std::string utf8_sanitize(std::string_view s) {
  if (utf8_valid(s)) return std::string(s);
  std::string out;
  Utf8Repair repair;
  repair.push(s, out);
  repair.finish(out);
  return out;
}

void Utf8Repair::push(std::string_view bytes, std::string& out) {
  std::string joined;
  if (!pending_.empty()) {
    joined = pending_;
    joined.append(bytes);
    pending_.clear();
    bytes = joined;
  }
  size_t i = 0, n = bytes.size();
  while (i < n) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {
      out += bytes[i++];
      continue;
    }
    size_t len;
    switch (utf8::classify(bytes, i, &len)) {
      case utf8::SeqStatus::Valid: out.append(bytes.substr(i, len)); break;
      case utf8::SeqStatus::Invalid: utf8_append(out, kReplacementChar); break;
      case utf8::SeqStatus::Incomplete: pending_.assign(bytes.substr(i)); return;
    }
    i += len;
  }
}

void Utf8Repair::finish(std::string& out) {
  // A truncated sequence at the very end is one maximal subpart: one U+FFFD.
  if (!pending_.empty()) utf8_append(out, kReplacementChar);
  pending_.clear();
}

bool is_whitespace(uint32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)); }

bool is_alphanumeric(uint32_t cp) {
  auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  int8_t type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

const std::string& byte_to_unicode(uint8_t b) { return byte_level_tables().to_unicode[b]; }

int unicode_to_byte(uint32_t cp) {
  const auto& t = byte_level_tables().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

std::string to_byte_level(std::string_view s) {
  const auto& t = byte_level_tables().to_unicode;
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) out += t[static_cast<uint8_t>(c)];
  return out;
}

std::string normalize_unicode(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<uint8_t>(c) < 0x80;
  if (ascii) return std::string(s);  // ASCII is invariant under all four forms

  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = nullptr;
  switch (form) {
    case NormalForm::NFC: norm = unorm2_getNFCInstance(&err); break;
    case NormalForm::NFD: norm = unorm2_getNFDInstance(&err); break;
    case NormalForm::NFKC: norm = unorm2_getNFKCInstance(&err); break;
    case NormalForm::NFKD: norm = unorm2_getNFKDInstance(&err); break;
  }
  CORVID_CHECK(U_SUCCESS(err), "tokenizer: ICU normalizer unavailable: ", u_errorName(err));

  // UTF-8 -> UTF-16 (ICU's working form), normalize, and back.
  int32_t n16 = 0;
  err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  std::vector<UChar> src(static_cast<size_t>(n16) + 1);
  err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(src.data(), n16 + 1, &n16, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr,
                       &err);
  CORVID_CHECK(U_SUCCESS(err), "tokenizer: UTF-8 to UTF-16 failed: ", u_errorName(err));
  err = U_ZERO_ERROR;
  if (unorm2_isNormalized(norm, src.data(), n16, &err) && U_SUCCESS(err)) return std::string(s);

  std::vector<UChar> dst(static_cast<size_t>(n16) * 4 + 16);
  err = U_ZERO_ERROR;
  int32_t nd = unorm2_normalize(norm, src.data(), n16, dst.data(), static_cast<int32_t>(dst.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    dst.resize(static_cast<size_t>(nd) + 1);
    err = U_ZERO_ERROR;
    nd = unorm2_normalize(norm, src.data(), n16, dst.data(), static_cast<int32_t>(dst.size()), &err);
  }
  CORVID_CHECK(U_SUCCESS(err), "tokenizer: Unicode normalization failed: ", u_errorName(err));

  std::string out(static_cast<size_t>(nd) * 3 + 4, '\0');
  int32_t n8 = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &n8, dst.data(), nd, &err);
  CORVID_CHECK(U_SUCCESS(err), "tokenizer: UTF-16 to UTF-8 failed: ", u_errorName(err));
  out.resize(static_cast<size_t>(n8));
  return out;
}

}  // namespace corvid::tok
