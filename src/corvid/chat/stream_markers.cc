#include "corvid/chat/stream_markers.h"

#include <algorithm>

namespace corvid::chat {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim_leading_spaces(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size() && is_space(text[begin])) ++begin;
  return text.substr(begin);
}

std::string_view trim_trailing_spaces(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  return text.substr(0, end);
}

std::string_view trim_spaces(std::string_view text) {
  return trim_trailing_spaces(trim_leading_spaces(text));
}

std::optional<MarkerHit> find_first_marker(std::string_view text,
                                           std::span<const std::string_view> markers) {
  std::optional<MarkerHit> best;
  for (std::size_t i = 0; i < markers.size(); ++i) {
    std::size_t pos = text.find(markers[i]);
    if (pos == std::string_view::npos) continue;
    // On a tie the longer marker wins, so "<function=" is not shadowed by a shorter one.
    if (!best || pos < best->pos || (pos == best->pos && markers[i].size() > markers[best->marker].size()))
      best = MarkerHit{pos, i};
  }
  return best;
}

std::size_t partial_marker_suffix(std::string_view text,
                                  std::span<const std::string_view> markers) {
  std::size_t longest = 0;
  for (std::string_view marker : markers) {
    std::size_t max_len = std::min(marker.size() - 1, text.size());
    for (std::size_t len = max_len; len > longest; --len) {
      if (text.substr(text.size() - len) == marker.substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

bool is_marker_prefix(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

std::optional<std::size_t> json_value_end(std::string_view text, std::size_t start) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::nullopt;
}

}  // namespace corvid::chat
