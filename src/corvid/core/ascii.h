// ASCII helpers for protocol tokens and decoded text, whatever the locale: case
// folding (header names, form values, format and language names; bytes outside A-Z
// pass through) and trimming ASCII blanks.
#pragma once

#include <string>
#include <string_view>

namespace corvid {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// `s` without the leading and trailing bytes that are in `blanks`.
inline std::string ascii_trim(std::string_view s, std::string_view blanks = " \t\r\n") {
  const size_t a = s.find_first_not_of(blanks);
  if (a == std::string_view::npos) return "";
  return std::string(s.substr(a, s.find_last_not_of(blanks) - a + 1));
}

}  // namespace corvid
