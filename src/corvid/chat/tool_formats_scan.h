// Internal: scanning pieces the tool-call syntaxes share (tool_formats_*.cc): RegionScan
// shorthands and the parameter lists of the XML-style formats.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "corvid/chat/tool_formats.h"

namespace corvid::chat {

inline RegionScan malformed(std::size_t length) { return {true, length, std::nullopt}; }
inline RegionScan need_more() { return {}; }

inline std::size_t skip_spaces(std::string_view text, std::size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// How an XML-style format writes a call's parameters, a run of NAME/VALUE elements:
//   Qwen3-Coder: <parameter=NAME>\nVALUE\n</parameter> ... </function>
//   MiniCPM5:    <param name="NAME">VALUE or <![CDATA[VALUE]]></param> ... </function>
//   GLM-4.5:     <arg_key>NAME</arg_key>\n<arg_value>VALUE</arg_value> ... (end of text)
struct ParameterListSyntax {
  std::string_view name_open = {};
  std::string_view name_close = {};
  std::string_view value_open = {};  // "" where the value follows the name directly
  std::string_view value_close = {};
  std::string_view list_end = {};    // what ends the list; "" for the end of the text
  // A value may also end at the next name_open or list_end (Qwen3-Coder drops </parameter>).
  bool value_close_optional = false;
  // The template writes the value between newlines: one leading and one trailing one are
  // not part of it.
  bool strip_newlines = false;
  bool cdata_values = false;  // a value may be wrapped in <![CDATA[...]]>, holding any markup
};

// Reads the parameters from text[pos] on into call.arguments (typed by `typer` for
// call.name), through list_end. Returns the position after list_end, or nullopt when
// the list is malformed (a bad or missing element, an empty or markup-holding name).
std::optional<std::size_t> scan_parameter_list(std::string_view text, std::size_t pos,
                                               const ParameterListSyntax& syntax, const ParameterTyper& typer,
                                               ParsedCall& call);

}  // namespace corvid::chat
