// Names read from a file (keys, tensor names) go into error messages; a hostile
// file could put newlines or kilobytes there. printable() keeps a message one
// readable line: control and non-ASCII bytes become \xNN, long names are cut.
#pragma once

#include <string>
#include <string_view>

namespace corvid {

inline std::string printable(std::string_view s, size_t max_len = 120) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > max_len) out += "...";
  return out;
}

}  // namespace corvid
