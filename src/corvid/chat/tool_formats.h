// Internal: the per-family syntaxes behind ToolCallParser. Each says where a call region
// may start in content and, given text that starts there, whether the region is complete
// and what calls it holds. The parser does the streaming bookkeeping around them.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/chat/tool_call_parser.h"

namespace corvid::chat {

struct RegionStart {
  bool found = false;
  std::size_t pos = 0;   // where the region starts, when found
  std::size_t hold = 0;  // otherwise: how many trailing characters might begin one
};

struct RegionScan {
  bool complete = false;  // false: the region needs more text (never returned at_end)
  std::size_t length = 0; // characters the region spans, at least 1 when complete
  // The calls in the region; nullopt when it is malformed, and then its text is content.
  // An empty vector means a marker that is dropped (e.g. Gemma's <|tool_response>).
  std::optional<std::vector<ParsedCall>> calls;
};

class ToolCallSyntax {
 public:
  virtual ~ToolCallSyntax() = default;
  // `output_started`: non-whitespace output came before `text` (Llama calls must be the whole output).
  virtual RegionStart find_start(std::string_view text, bool output_started) const = 0;
  // `text` starts where find_start said. With at_end, the region must be decided.
  virtual RegionScan scan(std::string_view text, bool at_end) const = 0;
};

// Default find_start: the earliest of a fixed set of markers.
RegionStart find_marker_start(std::string_view text, std::span<const std::string_view> markers);

// A call object {"name": ..., "arguments"|"parameters": {...} or "<json text>"}; nullopt if not one.
std::optional<ParsedCall> call_from_json(const nlohmann::ordered_json& value);
// Parses JSON text without throwing; nullopt when it is not valid JSON.
std::optional<nlohmann::ordered_json> try_parse_json(std::string_view text);

// Types a textual parameter value by the tool's JSON schema (XML formats).
class ParameterTyper {
 public:
  explicit ParameterTyper(const nlohmann::json& tools);
  nlohmann::ordered_json value(std::string_view function, std::string_view parameter,
                               std::string_view text) const;

 private:
  nlohmann::json tools_;
};

std::unique_ptr<ToolCallSyntax> make_hermes_syntax();
std::unique_ptr<ToolCallSyntax> make_llama3_syntax();
std::unique_ptr<ToolCallSyntax> make_mistral_syntax();
std::unique_ptr<ToolCallSyntax> make_harmony_syntax();
std::unique_ptr<ToolCallSyntax> make_xml_function_syntax(const nlohmann::json& tools);
std::unique_ptr<ToolCallSyntax> make_minicpm_syntax(const nlohmann::json& tools);
std::unique_ptr<ToolCallSyntax> make_gemma4_syntax();
std::unique_ptr<ToolCallSyntax> make_deepseek_syntax();
std::unique_ptr<ToolCallSyntax> make_kimi_syntax();
std::unique_ptr<ToolCallSyntax> make_glm_syntax(const nlohmann::json& tools);
std::unique_ptr<ToolCallSyntax> make_forced_list_syntax();
std::unique_ptr<ToolCallSyntax> make_forced_named_syntax(const nlohmann::json& tools);

}  // namespace corvid::chat
