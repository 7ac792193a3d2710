// Shared vocabulary of the streaming output parsers (reasoning, tool calls, their
// combination): the events they emit and the text helpers that implement hold-back.
//
// The parsers are fed decoded text pieces in whatever split the detokenizer produces.
// A marker such as "<tool_call>" may arrive as "<tool" + "_call>", so text that could
// still turn out to be the beginning of a marker is held back until it is decided.
// The invariant every parser keeps: concatenating the deltas it emitted equals the
// final result, for any split of the same text.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corvid::chat {

struct OutputEvent {
  enum class Kind {
    kContent,            // text: a delta of the answer
    kReasoning,          // text: a delta of reasoning_content
    kToolCallStart,      // tool_index, id, name: a new call
    kToolCallArguments,  // tool_index, text: a delta of function.arguments (JSON text)
  };
  Kind kind = Kind::kContent;
  std::string text;
  std::size_t tool_index = 0;
  std::string id;
  std::string name;
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // compact JSON object text, keys in the order the model wrote them
};

// ASCII whitespace as the models' templates strip it (Python str.strip()).
bool is_space(char c);
std::string_view trim_spaces(std::string_view text);
std::string_view trim_leading_spaces(std::string_view text);
std::string_view trim_trailing_spaces(std::string_view text);

// Where the earliest of `markers` starts in `text` (and which one), if any does.
struct MarkerHit {
  std::size_t pos = 0;
  std::size_t marker = 0;  // index into markers
};
std::optional<MarkerHit> find_first_marker(std::string_view text,
                                           std::span<const std::string_view> markers);

// Length of the longest proper suffix of `text` that is a prefix of one of `markers`:
// the part to hold back because the next piece could complete the marker.
std::size_t partial_marker_suffix(std::string_view text,
                                  std::span<const std::string_view> markers);

// True when `text` is a (possibly empty) proper prefix of `marker`.
bool is_marker_prefix(std::string_view text, std::string_view marker);

// End (one past) of the JSON object or array starting at text[start] ('{' or '['),
// found by bracket counting outside strings; nullopt while it is still open. It does
// not validate: the caller parses the slice.
std::optional<std::size_t> json_value_end(std::string_view text, std::size_t start);

}  // namespace corvid::chat
