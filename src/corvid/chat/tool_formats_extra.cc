// Tool-call formats beyond the five the project started with, found in the real
// templates: DeepSeek R1/V3.1 and Kimi K2 (JSON arguments between their own special
// tokens) and GLM-4.5/4.6 (<arg_key>/<arg_value> pairs typed by the tool's schema).
// GLM also writes <tool_call>, so without its own format it would be read as Hermes.
#include <algorithm>
#include <array>
#include <functional>

#include "corvid/chat/tool_formats.h"
#include "corvid/chat/tool_formats_scan.h"

namespace corvid::chat {
namespace {


bool valid_name(std::string_view name) {
  return !name.empty() && name.find_first_of(" \t\r\n<>{}\"") == std::string_view::npos;
}

std::string plain_name(std::string_view text) {
  std::string_view name = trim_spaces(text);
  return valid_name(name) ? std::string(name) : std::string();
}

// Kimi K2 writes the call id: "functions.get_weather:0".
std::string kimi_name(std::string_view text) {
  std::string_view id = trim_spaces(text);
  if (id.starts_with("functions.")) id.remove_prefix(10);
  std::size_t colon = id.rfind(':');
  if (colon != std::string_view::npos) id = id.substr(0, colon);
  return valid_name(id) ? std::string(id) : std::string();
}

// <section_begin>(<call_begin>NAME<args_begin>{json}<call_end>)+<section_end>; the
// section markers carry nothing and are dropped.
struct DelimitedMarkers {
  std::string_view section_begin;
  std::string_view section_end;
  std::string_view call_begin;
  std::string_view args_begin;
  std::string_view call_end;
  // The function name from the text between call_begin and args_begin; "" if invalid.
  std::string (*name_of)(std::string_view);
  bool r1_fenced = false;  // also DeepSeek-R1's "function<sep>name\n```json\n{...}\n```"
};

class DelimitedJsonSyntax final : public ToolCallSyntax {
 public:
  explicit DelimitedJsonSyntax(DelimitedMarkers markers)
      : m_(markers), starts_{m_.section_begin, m_.section_end, m_.call_begin} {}

  RegionStart find_start(std::string_view text, bool) const override { return find_marker_start(text, starts_); }

  RegionScan scan(std::string_view text, bool at_end) const override {
    for (std::string_view dropped : {m_.section_begin, m_.section_end})
      if (text.starts_with(dropped)) return {true, dropped.size(), std::vector<ParsedCall>{}};
    std::size_t args = text.find(m_.args_begin, m_.call_begin.size());
    // A name is short: a long stretch without args_begin is no call.
    // (Where args_begin starts, or the earliest it still can: a partial one may end the text.)
    std::size_t args_or_end =
        args != std::string_view::npos ? args : text.size() - partial_marker_suffix(text, std::array{m_.args_begin});
    std::size_t name_span = std::max(args_or_end, m_.call_begin.size()) - m_.call_begin.size();
    if (name_span > kMaxName) return malformed(m_.call_begin.size());
    if (args == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
    std::string_view before_args = text.substr(m_.call_begin.size(), args - m_.call_begin.size());
    std::size_t json = skip_spaces(text, args + m_.args_begin.size());
    if (json == text.size()) return at_end ? malformed(text.size()) : need_more();
    std::string name;
    bool fenced = false;
    if (text[json] != '{' && m_.r1_fenced && trim_spaces(before_args) == "function") {
      // DeepSeek-R1: function<｜tool▁sep｜>NAME\n```json\n{...}\n```
      std::size_t line_end = text.find('\n', json);
      std::size_t name_line = (line_end == std::string_view::npos ? text.size() : line_end) - json;
      if (name_line > kMaxName) return malformed(json);
      if (line_end == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
      name = plain_name(text.substr(json, line_end - json));
      if (name.empty()) return malformed(line_end);
      std::size_t fence = skip_spaces(text, line_end);
      std::string_view rest = text.substr(fence);
      if (!rest.starts_with(kFenceOpen)) {
        if (is_marker_prefix(rest, kFenceOpen) && !at_end) return need_more();
        return malformed(fence);
      }
      json = skip_spaces(text, fence + kFenceOpen.size());
      if (json == text.size()) return at_end ? malformed(text.size()) : need_more();
      fenced = true;
    } else {
      name = m_.name_of(before_args);
    }
    if (name.empty()) return malformed(args);
    if (text[json] != '{') return malformed(json);
    std::optional<std::size_t> json_end = json_value_end(text, json);
    if (!json_end) return at_end ? malformed(text.size()) : need_more();
    std::size_t after = skip_spaces(text, *json_end);
    if (fenced) {
      std::string_view rest = text.substr(after);
      if (!rest.starts_with(kFenceClose)) {
        if (is_marker_prefix(rest, kFenceClose) && !at_end) return need_more();
        return malformed(after);
      }
      after = skip_spaces(text, after + kFenceClose.size());
    }
    std::string_view rest = text.substr(after);
    std::size_t length;
    if (rest.starts_with(m_.call_end)) {
      length = after + m_.call_end.size();
    } else if (is_marker_prefix(rest, m_.call_end)) {
      if (!at_end) return need_more();
      length = text.size();  // the output ended right after the arguments
    } else {
      return malformed(after);
    }
    std::optional<nlohmann::ordered_json> value = try_parse_json(text.substr(json, *json_end - json));
    if (!value || !value->is_object()) return malformed(length);
    return {true, length, std::vector<ParsedCall>{ParsedCall{std::move(name), std::move(*value)}}};
  }

 private:
  static constexpr std::size_t kMaxName = 256;
  static constexpr std::string_view kFenceOpen = "```json";
  static constexpr std::string_view kFenceClose = "```";
  DelimitedMarkers m_;
  std::array<std::string_view, 3> starts_;
};

// GLM-4.5/4.6: <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>;
// the template writes string values raw and others as JSON, so values are typed by
// the schema.
class GlmSyntax final : public ToolCallSyntax {
 public:
  explicit GlmSyntax(const nlohmann::json& tools) : typer_(tools) {}

  RegionStart find_start(std::string_view text, bool) const override { return find_marker_start(text, kMarkers); }

  RegionScan scan(std::string_view text, bool at_end) const override {
    std::size_t close = text.find(kClose, kOpen.size());
    if (close == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
    std::size_t length = close + kClose.size();
    std::optional<ParsedCall> call = parse(text.substr(kOpen.size(), close - kOpen.size()));
    if (!call) return malformed(length);
    return {true, length, std::vector<ParsedCall>{std::move(*call)}};
  }

 private:
  std::optional<ParsedCall> parse(std::string_view body) const {
    std::size_t first_key = body.find(kKeyOpen);
    std::string name = plain_name(body.substr(0, first_key));
    if (name.empty()) return std::nullopt;
    ParsedCall call{name, nlohmann::ordered_json::object()};
    std::size_t pos = first_key == std::string_view::npos ? body.size() : first_key;
    if (!scan_parameter_list(body, pos, kArguments, typer_, call)) return std::nullopt;
    return call;
  }

  ParameterTyper typer_;
  static constexpr std::string_view kOpen = "<tool_call>";
  static constexpr std::string_view kClose = "</tool_call>";
  static constexpr std::string_view kKeyOpen = "<arg_key>";
  static constexpr std::string_view kKeyClose = "</arg_key>";
  static constexpr std::string_view kValueOpen = "<arg_value>";
  static constexpr std::string_view kValueClose = "</arg_value>";
  static constexpr std::array<std::string_view, 1> kMarkers{kOpen};
  static constexpr ParameterListSyntax kArguments{
      .name_open = kKeyOpen, .name_close = kKeyClose, .value_open = kValueOpen, .value_close = kValueClose};
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_deepseek_syntax() {
  return std::make_unique<DelimitedJsonSyntax>(DelimitedMarkers{
      "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
      "<｜tool▁call▁end｜>", plain_name, true});
}

std::unique_ptr<ToolCallSyntax> make_kimi_syntax() {
  return std::make_unique<DelimitedJsonSyntax>(DelimitedMarkers{
      "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
      "<|tool_call_argument_begin|>", "<|tool_call_end|>", kimi_name});
}

std::unique_ptr<ToolCallSyntax> make_glm_syntax(const nlohmann::json& tools) {
  return std::make_unique<GlmSyntax>(tools);
}

}  // namespace corvid::chat
