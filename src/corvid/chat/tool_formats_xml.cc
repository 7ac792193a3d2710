// Tool-call formats whose arguments are XML-ish text: Qwen3-Coder / Qwen3.5
// (<function=f><parameter=p>) and MiniCPM5 (<function name="f"><param name="p">), plus
// the schema typing their textual values need.
#include <algorithm>
#include <array>
#include <charconv>

#include "corvid/chat/tool_formats.h"
#include "corvid/chat/tool_formats_scan.h"
#include "corvid/core/ascii.h"

namespace corvid::chat {
namespace {


const nlohmann::json* find_parameter_schema(const nlohmann::json& tools, std::string_view function,
                                            std::string_view parameter) {
  if (!tools.is_array()) return nullptr;
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const nlohmann::json& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || !fn.contains("name") || fn["name"] != function) continue;
    if (!fn.contains("parameters") || !fn["parameters"].is_object()) return nullptr;
    const nlohmann::json& params = fn["parameters"];
    if (!params.contains("properties") || !params["properties"].is_object()) return nullptr;
    auto prop = params["properties"].find(std::string(parameter));
    return prop == params["properties"].end() ? nullptr : &*prop;
  }
  return nullptr;
}

void collect_types(const nlohmann::json& schema, std::vector<std::string>& types, int depth = 0) {
  if (!schema.is_object() || depth > 8) return;
  if (auto type = schema.find("type"); type != schema.end()) {
    if (type->is_string()) types.push_back(type->get<std::string>());
    if (type->is_array())
      for (const auto& t : *type)
        if (t.is_string()) types.push_back(t.get<std::string>());
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (auto options = schema.find(key); options != schema.end() && options->is_array())
      for (const auto& option : *options) collect_types(option, types, depth + 1);
}

std::optional<nlohmann::ordered_json> as_type(std::string_view type, std::string_view text) {
  std::string_view trimmed = trim_spaces(text);
  if (type == "string") return nlohmann::ordered_json(std::string(text));
  if (type == "null") {
    if (trimmed == "null" || trimmed == "None") return nlohmann::ordered_json(nullptr);
    return std::nullopt;
  }
  if (type == "integer") {
    long long number = 0;
    auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), number);
    if (error == std::errc() && end == trimmed.data() + trimmed.size() && !trimmed.empty())
      return nlohmann::ordered_json(number);
    // "3.0" for an integer: keep the number rather than turning it into a string.
    std::optional<nlohmann::ordered_json> value = try_parse_json(trimmed);
    if (value && value->is_number()) return value;
    return std::nullopt;
  }
  if (type == "number") {
    std::optional<nlohmann::ordered_json> value = try_parse_json(trimmed);
    if (value && value->is_number()) return value;
    return std::nullopt;
  }
  if (type == "boolean") {
    // MiniCPM's template writes Python's str(True).
    std::string lower = ascii_lower(trimmed);
    if (lower == "true") return nlohmann::ordered_json(true);
    if (lower == "false") return nlohmann::ordered_json(false);
    return std::nullopt;
  }
  if (type == "object" || type == "array") {
    std::optional<nlohmann::ordered_json> value = try_parse_json(trimmed);
    if (value && (type == "object" ? value->is_object() : value->is_array())) return value;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

ParameterTyper::ParameterTyper(const nlohmann::json& tools) : tools_(tools) {}

nlohmann::ordered_json ParameterTyper::value(std::string_view function, std::string_view parameter,
                                             std::string_view text) const {
  // Parameters the schema does not describe stay text, as the model wrote them.
  const nlohmann::json* schema = find_parameter_schema(tools_, function, parameter);
  if (!schema) return std::string(text);
  std::vector<std::string> types;
  collect_types(*schema, types);
  // Non-string types first: with ["string", "integer"], "5" is meant as the number.
  std::stable_partition(types.begin(), types.end(), [](const std::string& t) { return t != "string"; });
  for (const std::string& type : types)
    if (std::optional<nlohmann::ordered_json> value = as_type(type, text)) return *value;
  if (types.empty())  // a schema without a type (e.g. only an enum): JSON if it parses
    if (std::optional<nlohmann::ordered_json> value = try_parse_json(trim_spaces(text))) return *value;
  return std::string(text);
}

namespace {

// Qwen3-Coder / Qwen3.5:
//   <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// The template writes each value between newlines, so one leading and one trailing
// newline are not part of it. Qwen3-Coder sometimes drops <tool_call> or </parameter>;
// both are accepted.
class XmlFunctionSyntax final : public ToolCallSyntax {
 public:
  explicit XmlFunctionSyntax(const nlohmann::json& tools) : typer_(tools) {}

  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    if (text.starts_with(kFunction)) {
      std::size_t end = text.find(kFunctionClose);
      if (end == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
      end += kFunctionClose.size();
      return finish(parse_functions(text.substr(0, end)), end);
    }
    std::size_t body = skip_spaces(text, kToolCall.size());
    std::string_view rest = text.substr(body);
    if (!rest.empty() && !rest.starts_with(kFunction) && !is_marker_prefix(rest, kFunction))
      return malformed(kToolCall.size());
    std::size_t close = text.find(kToolCallClose, kToolCall.size());
    if (close == std::string_view::npos) {
      if (!at_end) return need_more();
      return finish(parse_functions(text.substr(kToolCall.size())), text.size());
    }
    std::string_view inner = text.substr(kToolCall.size(), close - kToolCall.size());
    return finish(parse_functions(inner), close + kToolCallClose.size());
  }

 private:
  static RegionScan finish(std::optional<std::vector<ParsedCall>> calls, std::size_t length) {
    if (!calls || calls->empty()) return malformed(length);
    return {true, length, std::move(calls)};
  }

  // One or more <function=...>...</function> blocks, separated by whitespace only.
  std::optional<std::vector<ParsedCall>> parse_functions(std::string_view body) const {
    std::vector<ParsedCall> calls;
    std::size_t pos = skip_spaces(body, 0);
    while (pos < body.size()) {
      if (!body.substr(pos).starts_with(kFunction)) return std::nullopt;
      std::size_t name_begin = pos + kFunction.size();
      std::size_t name_end = body.find('>', name_begin);
      if (name_end == std::string_view::npos) return std::nullopt;
      std::string_view name = trim_spaces(body.substr(name_begin, name_end - name_begin));
      if (name.empty() || name.find('\n') != std::string_view::npos) return std::nullopt;
      ParsedCall call{std::string(name), nlohmann::ordered_json::object()};
      std::optional<std::size_t> end = scan_parameter_list(body, name_end + 1, kParameters, typer_, call);
      if (!end) return std::nullopt;  // includes a missing </function>
      calls.push_back(std::move(call));
      pos = skip_spaces(body, *end);
    }
    return calls;
  }

  ParameterTyper typer_;
  static constexpr std::string_view kToolCall = "<tool_call>";
  static constexpr std::string_view kToolCallClose = "</tool_call>";
  static constexpr std::string_view kFunction = "<function=";
  static constexpr std::string_view kFunctionClose = "</function>";
  static constexpr std::string_view kParameter = "<parameter=";
  static constexpr std::string_view kParameterClose = "</parameter>";
  static constexpr std::array<std::string_view, 2> kMarkers{kToolCall, kFunction};
  static constexpr ParameterListSyntax kParameters{.name_open = kParameter,
                                                   .name_close = ">",
                                                   .value_close = kParameterClose,
                                                   .list_end = kFunctionClose,
                                                   .value_close_optional = true,
                                                   .strip_newlines = true};
};

// MiniCPM5: <function name="f"><param name="p">value</param></function>, a value holding
// '<', '&' or a newline wrapped in <![CDATA[...]]>. CDATA may contain "</function>", so
// the end of a call is searched outside CDATA sections.
class MiniCpmSyntax final : public ToolCallSyntax {
 public:
  explicit MiniCpmSyntax(const nlohmann::json& tools) : typer_(tools) {}

  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    std::optional<std::size_t> end = find_outside_cdata(text, kFunctionClose);
    if (!end) return at_end ? malformed(text.size()) : need_more();
    std::size_t length = *end + kFunctionClose.size();
    std::optional<ParsedCall> call = parse_function(text.substr(0, length));
    if (!call) return malformed(length);
    return {true, length, std::vector<ParsedCall>{std::move(*call)}};
  }

 private:
  static std::optional<std::size_t> find_outside_cdata(std::string_view text, std::string_view needle) {
    std::size_t pos = 0;
    while (true) {
      std::size_t hit = text.find(needle, pos);
      std::size_t cdata = text.find(kCdataOpen, pos);
      if (hit == std::string_view::npos) return std::nullopt;
      if (cdata == std::string_view::npos || hit < cdata) return hit;
      std::size_t cdata_end = text.find(kCdataClose, cdata + kCdataOpen.size());
      if (cdata_end == std::string_view::npos) return std::nullopt;
      pos = cdata_end + kCdataClose.size();
    }
  }

  // `text` is one whole <function name="f">...</function>.
  std::optional<ParsedCall> parse_function(std::string_view text) const {
    std::size_t name_begin = kFunctionOpen.size();
    std::size_t name_end = text.find("\">", name_begin);
    if (name_end == std::string_view::npos) return std::nullopt;
    std::string_view name = text.substr(name_begin, name_end - name_begin);
    if (name.empty() || name.find_first_of("\"<>\n") != std::string_view::npos) return std::nullopt;
    ParsedCall call{std::string(name), nlohmann::ordered_json::object()};
    std::optional<std::size_t> end = scan_parameter_list(text, name_end + 2, kParameters, typer_, call);
    if (!end || *end != text.size()) return std::nullopt;
    return call;
  }

  ParameterTyper typer_;
  static constexpr std::string_view kFunctionOpen = "<function name=\"";
  static constexpr std::string_view kFunctionClose = "</function>";
  static constexpr std::string_view kParamOpen = "<param name=\"";
  static constexpr std::string_view kParamClose = "</param>";
  static constexpr std::string_view kCdataOpen = "<![CDATA[";
  static constexpr std::string_view kCdataClose = "]]>";
  static constexpr std::array<std::string_view, 1> kMarkers{kFunctionOpen};
  static constexpr ParameterListSyntax kParameters{.name_open = kParamOpen,
                                                   .name_close = "\">",
                                                   .value_close = kParamClose,
                                                   .list_end = kFunctionClose,
                                                   .cdata_values = true};
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_xml_function_syntax(const nlohmann::json& tools) {
  return std::make_unique<XmlFunctionSyntax>(tools);
}
std::unique_ptr<ToolCallSyntax> make_minicpm_syntax(const nlohmann::json& tools) {
  return std::make_unique<MiniCpmSyntax>(tools);
}

}  // namespace corvid::chat
