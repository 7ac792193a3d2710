// Tool-call formats whose arguments are JSON: Hermes/Qwen, Llama 3.x, Mistral, gpt-oss.
//
// A scan must decide the same way whether it sees the whole output or any prefix of it
// (the streaming invariant), so every early decision looks only at text that is already
// there and never at how much is there.
#include <array>
#include <cctype>

#include "corvid/chat/tool_formats.h"
#include "corvid/chat/tool_formats_scan.h"
#include "corvid/core/error.h"

namespace corvid::chat {

RegionStart find_marker_start(std::string_view text, std::span<const std::string_view> markers) {
  if (std::optional<MarkerHit> hit = find_first_marker(text, markers)) return {true, hit->pos, 0};
  return {false, 0, partial_marker_suffix(text, markers)};
}

std::optional<nlohmann::ordered_json> try_parse_json(std::string_view text) {
  // allow_exceptions=false: malformed model output yields a discarded value, not a throw.
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(text, nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::optional<ParsedCall> call_from_json(const nlohmann::ordered_json& value) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = value.find("arguments");
  if (args == value.end()) args = value.find("parameters");
  ParsedCall call{name->get<std::string>(), nlohmann::ordered_json::object()};
  if (args == value.end() || args->is_null()) return call;
  if (args->is_object()) {
    call.arguments = *args;
    return call;
  }
  if (args->is_string()) {  // arguments given as JSON text, as OpenAI sends them
    std::string_view text = trim_spaces(args->get_ref<const std::string&>());
    if (text.empty()) return call;
    std::optional<nlohmann::ordered_json> parsed = try_parse_json(text);
    if (parsed && parsed->is_object()) {
      call.arguments = std::move(*parsed);
      return call;
    }
  }
  return std::nullopt;
}

namespace {

RegionScan parsed(std::size_t length, std::vector<ParsedCall> calls) {
  return {true, length, std::move(calls)};
}

// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block per call.
class HermesSyntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    std::size_t body = skip_spaces(text, kOpen.size());
    if (body == text.size()) return at_end ? malformed(text.size()) : need_more();
    // Prose that merely mentions the tag: release the tag and keep reading as content.
    if (text[body] != '{') return malformed(kOpen.size());
    // The call ends where its JSON object does, so a "</tool_call>" inside a string
    // value does not cut it short.
    std::optional<std::size_t> json_end = json_value_end(text, body);
    if (!json_end) return at_end ? malformed(text.size()) : need_more();
    std::size_t after = skip_spaces(text, *json_end);
    std::string_view rest = text.substr(after);
    std::size_t length;
    if (rest.starts_with(kClose)) {
      length = after + kClose.size();
    } else if (is_marker_prefix(rest, kClose)) {
      // The output ended before </tool_call> (a stop string may have eaten it): the
      // call is complete without it.
      if (!at_end) return need_more();
      length = text.size();
    } else {
      std::size_t close = text.find(kClose, after);
      if (close == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
      return malformed(close + kClose.size());
    }
    std::optional<nlohmann::ordered_json> value = try_parse_json(text.substr(body, *json_end - body));
    if (!value) return malformed(length);
    std::optional<ParsedCall> call = call_from_json(*value);
    if (!call) return malformed(length);
    return parsed(length, {std::move(*call)});
  }

 private:
  static constexpr std::string_view kOpen = "<tool_call>";
  static constexpr std::string_view kClose = "</tool_call>";
  static constexpr std::array<std::string_view, 1> kMarkers{kOpen};
};

// Llama 3.1-3.3: the whole output is one call {"name": "f", "parameters": {...}}, after
// an optional <|python_tag|>; some 3.2 outputs chain several with ';'. Output that starts
// with '{' is therefore held to the end before it is known to be a call or an answer.
class Llama3Syntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view text, bool output_started) const override {
    if (output_started) return {};
    std::size_t pos = skip_spaces(text, 0);
    std::string_view rest = text.substr(pos);
    if (rest.empty() || is_marker_prefix(rest, kPythonTag)) return {false, 0, text.size()};
    if (rest.front() == '{' || rest.starts_with(kPythonTag)) return {true, pos, 0};
    return {};
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    if (!at_end) return need_more();
    std::size_t pos = text.starts_with(kPythonTag) ? kPythonTag.size() : 0;
    std::vector<ParsedCall> calls;
    while (true) {
      pos = skip_spaces(text, pos);
      while (pos < text.size() && text[pos] == ';') pos = skip_spaces(text, pos + 1);
      if (pos == text.size()) break;
      if (text[pos] != '{') return malformed(text.size());
      std::optional<std::size_t> end = json_value_end(text, pos);
      if (!end) return malformed(text.size());
      std::optional<nlohmann::ordered_json> value = try_parse_json(text.substr(pos, *end - pos));
      // An answer that happens to be a JSON object is not a call: insist on the keys.
      if (!value || !value->is_object() || (!value->contains("parameters") && !value->contains("arguments")))
        return malformed(text.size());
      std::optional<ParsedCall> call = call_from_json(*value);
      if (!call) return malformed(text.size());
      calls.push_back(std::move(*call));
      pos = *end;
    }
    if (calls.empty()) return malformed(text.size());
    return parsed(text.size(), std::move(calls));
  }

 private:
  static constexpr std::string_view kPythonTag = "<|python_tag|>";
};

// Mistral: [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (Nemo) or, per call,
// [TOOL_CALLS]f[ARGS]{...} with an optional [CALL_ID]id before [ARGS] (Small 3.2,
// Devstral, Ministral 3).
class MistralSyntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    std::size_t pos = skip_spaces(text, kToolCalls.size());
    if (pos == text.size()) return at_end ? malformed(text.size()) : need_more();
    if (text[pos] == '[') return scan_array(text, pos, at_end);
    std::size_t name_end = pos;
    while (name_end < text.size() && is_name_char(text[name_end])) ++name_end;
    if (name_end == text.size()) return at_end ? malformed(text.size()) : need_more();
    if (name_end == pos) return malformed(kToolCalls.size());
    std::string_view after_name = text.substr(name_end);
    std::size_t args_at = name_end;
    if (after_name.starts_with(kCallId)) {
      std::size_t id_end = name_end + kCallId.size();
      while (id_end < text.size() && std::isalnum(static_cast<unsigned char>(text[id_end]))) ++id_end;
      if (id_end == text.size()) return at_end ? malformed(text.size()) : need_more();
      args_at = id_end;
    }
    std::string_view at_args = text.substr(args_at);
    if (!at_args.starts_with(kArgs)) {
      bool may_complete = is_marker_prefix(at_args, kArgs) || (args_at == name_end && is_marker_prefix(at_args, kCallId));
      if (may_complete && !at_end) return need_more();
      return malformed(args_at);
    }
    std::size_t json_at = skip_spaces(text, args_at + kArgs.size());
    if (json_at == text.size()) return at_end ? malformed(text.size()) : need_more();
    if (text[json_at] != '{') return malformed(json_at);
    std::optional<std::size_t> end = json_value_end(text, json_at);
    if (!end) return at_end ? malformed(text.size()) : need_more();
    std::optional<nlohmann::ordered_json> args = try_parse_json(text.substr(json_at, *end - json_at));
    if (!args || !args->is_object()) return malformed(*end);
    return parsed(*end, {ParsedCall{std::string(text.substr(pos, name_end - pos)), std::move(*args)}});
  }

 private:
  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }

  static RegionScan scan_array(std::string_view text, std::size_t pos, bool at_end) {
    std::optional<std::size_t> end = json_value_end(text, pos);
    if (!end) return at_end ? malformed(text.size()) : need_more();
    std::optional<nlohmann::ordered_json> value = try_parse_json(text.substr(pos, *end - pos));
    if (!value || !value->is_array() || value->empty()) return malformed(*end);
    std::vector<ParsedCall> calls;
    for (const auto& item : *value) {
      std::optional<ParsedCall> call = call_from_json(item);
      if (!call) return malformed(*end);
      calls.push_back(std::move(*call));
    }
    return parsed(*end, std::move(calls));
  }

  static constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
  static constexpr std::string_view kCallId = "[CALL_ID]";
  static constexpr std::string_view kArgs = "[ARGS]";
  static constexpr std::array<std::string_view, 1> kMarkers{kToolCalls};
};

// gpt-oss (harmony): a message to a function recipient,
// <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>.
// The harmony reasoning parser hands such messages on in this shape.
class HarmonySyntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    std::size_t name_end = kOpen.size();
    while (name_end < text.size() && !is_space(text[name_end]) && text[name_end] != '<') ++name_end;
    if (name_end == text.size()) return at_end ? malformed(text.size()) : need_more();
    if (name_end == kOpen.size()) return malformed(kOpen.size());
    // The rest of the header (" <|constrain|>json") is short; a long one is not a call.
    std::size_t message = text.find(kMessage, name_end);
    std::size_t header_end = message != std::string_view::npos
                                 ? message
                                 : text.size() - partial_marker_suffix(text, std::array{kMessage});
    if (header_end - name_end > kMaxHeaderTail) return malformed(name_end);
    if (message == std::string_view::npos) return at_end ? malformed(text.size()) : need_more();
    std::size_t body = message + kMessage.size();
    std::size_t call_end = text.find(kCall, body);
    std::size_t length = call_end == std::string_view::npos ? text.size() : call_end + kCall.size();
    if (call_end == std::string_view::npos) {
      if (!at_end) return need_more();
      call_end = text.size();
    }
    std::string_view args_text = trim_spaces(text.substr(body, call_end - body));
    std::optional<nlohmann::ordered_json> args =
        args_text.empty() ? nlohmann::ordered_json::object() : try_parse_json(args_text);
    if (!args || !args->is_object()) return malformed(length);
    std::string name(text.substr(kOpen.size(), name_end - kOpen.size()));
    return parsed(length, {ParsedCall{std::move(name), std::move(*args)}});
  }

 private:
  static constexpr std::string_view kOpen = "<|channel|>commentary to=functions.";
  static constexpr std::string_view kMessage = "<|message|>";
  static constexpr std::string_view kCall = "<|call|>";
  static constexpr std::size_t kMaxHeaderTail = 64;
  static constexpr std::array<std::string_view, 1> kMarkers{kOpen};
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_hermes_syntax() { return std::make_unique<HermesSyntax>(); }
// Forced calls: the answer (after any reasoning) is one JSON value that structured
// output held to the tools' schemas; it is decided at the end of the text.
class ForcedSyntax final : public ToolCallSyntax {
 public:
  explicit ForcedSyntax(std::string name) : name_(std::move(name)) {}

  RegionStart find_start(std::string_view text, bool output_started) const override {
    if (output_started) return {};
    const std::size_t pos = skip_spaces(text, 0);
    if (pos == text.size()) return {false, 0, text.size()};
    return {true, pos, 0};
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    if (!at_end) return need_more();
    std::optional<nlohmann::ordered_json> value = try_parse_json(text);
    if (!value) return malformed(text.size());
    std::vector<ParsedCall> calls;
    if (!name_.empty()) {
      if (!value->is_object()) return malformed(text.size());
      calls.push_back({name_, std::move(*value)});
    } else {
      if (!value->is_array() || value->empty()) return malformed(text.size());
      for (const nlohmann::ordered_json& c : *value) {
        std::optional<ParsedCall> call = call_from_json(c);
        if (!call) return malformed(text.size());
        calls.push_back(std::move(*call));
      }
    }
    return parsed(text.size(), std::move(calls));
  }

 private:
  std::string name_;  // kForcedNamed's function; empty for a list
};

std::unique_ptr<ToolCallSyntax> make_llama3_syntax() { return std::make_unique<Llama3Syntax>(); }
std::unique_ptr<ToolCallSyntax> make_forced_list_syntax() { return std::make_unique<ForcedSyntax>(""); }
std::unique_ptr<ToolCallSyntax> make_forced_named_syntax(const nlohmann::json& tools) {
  std::string name;
  if (tools.is_array() && !tools.empty() && tools[0].contains("function"))
    name = tools[0]["function"].value("name", "");
  CORVID_CHECK(!name.empty(), "forced tool call: the named tool is missing");
  return std::make_unique<ForcedSyntax>(name);
}
std::unique_ptr<ToolCallSyntax> make_mistral_syntax() { return std::make_unique<MistralSyntax>(); }
std::unique_ptr<ToolCallSyntax> make_harmony_syntax() { return std::make_unique<HarmonySyntax>(); }

}  // namespace corvid::chat
