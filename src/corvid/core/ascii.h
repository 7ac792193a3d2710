// ASCII case folding for protocol tokens (header names, form values, format and
// language names): bytes outside A-Z pass through, whatever the locale.
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

}  // namespace corvid
