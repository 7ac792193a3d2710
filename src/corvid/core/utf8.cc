#include "corvid/core/utf8.h"

#include <cstdint>

namespace corvid::utf8 {

SeqStatus classify(std::string_view s, std::size_t i, std::size_t* len) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data()) + i;
  const std::size_t n = s.size() - i;
  const std::uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *len = 1;
    return SeqStatus::Valid;
  }
  std::size_t need;
  std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *len = 1;
    return SeqStatus::Invalid;
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (k >= n) {
      *len = k;
      return SeqStatus::Incomplete;
    }
    const std::uint8_t b = p[k];
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *len = k;
      return SeqStatus::Invalid;
    }
  }
  *len = need;
  return SeqStatus::Valid;
}

std::size_t decode(std::string_view s, std::size_t i, char32_t* cp) {
  std::size_t len;
  if (classify(s, i, &len) != SeqStatus::Valid) return 0;
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data()) + i;
  switch (len) {
    case 1: *cp = p[0]; break;
    case 2: *cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu); break;
    case 3: *cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu); break;
    default:
      *cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
  return len;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    if (classify(s, i, &len) != SeqStatus::Valid) return false;
    i += len;
  }
  return true;
}

}  // namespace corvid::utf8
