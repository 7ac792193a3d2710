#include "corvid/server/anthropic_api.h"

#include <initializer_list>
#include <limits>
#include <map>

namespace corvid::server {

namespace {

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where) {
  if (type == "image")
    bad(where, "image content is not supported yet: corvid serves text-only models (" + where + ")");
  bad(where, "content blocks of type '" + type + "' are not supported (" + where + ")");
}

// A text block's text; cache_control is a hint (the prefix cache is automatic).
std::string text_block(const Json& block, const std::string& where) {
  only_fields(block, {"type", "text", "cache_control", "citations"}, where);
  if (const Json* c = field(block, "citations"); c && !(c->is_array() && c->empty()))
    bad(where + ".citations", "citations are not supported");
  return required_string(block, "text", where);
}

// System prompt or tool result content: a string or text blocks.
std::string text_content(const Json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(where, where + " must be a string or a list of content blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = type_of(content[i], at);
    if (type != "text") unsupported_block(type, at);
    append_text(text, text_block(content[i], at));
  }
  return text;
}

// Anthropic's tool_use / tool_result pair becomes the assistant's tool call and a tool
// message, as the templates take OpenAI's (arguments as an object, as normalize_messages
// gives them); the tool message carries the name too, which some templates print.
struct Converter {
  Json out = Json::array();
  std::map<std::string, std::string> tool_names;  // tool_use id -> name

  void user(const Json& content, const std::string& where) {
    if (content.is_string()) return push("user", content.get<std::string>());
    std::string text;
    bool any_text = false;
    for (size_t i = 0; i < content.size(); ++i) {
      const std::string at = where + "[" + std::to_string(i) + "]";
      const std::string type = type_of(content[i], at);
      if (type == "text") {
        append_text(text, text_block(content[i], at));
        any_text = true;
      } else if (type == "tool_result") {
        tool_result(content[i], at);
      } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
        bad(at, "'" + type + "' blocks belong in assistant messages (" + at + ")");
      } else {
        unsupported_block(type, at);
      }
    }
    if (any_text) push("user", text);
  }

  void tool_result(const Json& block, const std::string& where) {
    only_fields(block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, where);
    const std::string& id = required_string(block, "tool_use_id", where);
    std::string text;
    if (const Json* c = field(block, "content")) text = text_content(*c, where + ".content");
    // No template has a field for a failed call: the model reads it in the text.
    if (boolean(block, "is_error", where).value_or(false)) text = "Error: " + text;
    Json message = {{"role", "tool"}, {"tool_call_id", id}, {"content", text}};
    if (auto name = tool_names.find(id); name != tool_names.end()) message["name"] = name->second;
    out.push_back(std::move(message));
  }

  // Returns whether the message is plain text (so that a final one can be continued).
  bool assistant(const Json& content, const std::string& where) {
    if (content.is_string()) {
      push("assistant", content.get<std::string>());
      return true;
    }
    std::string text, reasoning;
    Json calls = Json::array();
    for (size_t i = 0; i < content.size(); ++i) {
      const std::string at = where + "[" + std::to_string(i) + "]";
      const Json& block = content[i];
      const std::string type = type_of(block, at);
      if (type == "text") {
        append_text(text, text_block(block, at));
      } else if (type == "thinking") {
        only_fields(block, {"type", "thinking", "signature"}, at);
        reasoning += required_string(block, "thinking", at);
      } else if (type == "redacted_thinking") {
        // Its data is another server's encrypted reasoning: nothing a template could show.
        only_fields(block, {"type", "data"}, at);
      } else if (type == "tool_use") {
        only_fields(block, {"type", "id", "name", "input", "cache_control", "caller"}, at);
        if (const Json* caller = field(block, "caller"); caller && !(caller->is_object() && caller->value("type", "") == "direct"))
          bad(at + ".caller", "only direct tool callers are supported");
        const std::string& id = required_string(block, "id", at);
        const std::string& name = required_string(block, "name", at);
        const Json* input = field(block, "input");
        if (!input || !input->is_object()) bad(at + ".input", at + " needs an 'input' object");
        tool_names[id] = name;
        calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *input}}}});
      } else if (type == "tool_result") {
        bad(at, "'tool_result' blocks belong in user messages (" + at + ")");
      } else {
        unsupported_block(type, at);
      }
    }
    const bool plain = calls.empty() && reasoning.empty();
    Json message = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
    out.push_back(std::move(message));
    return plain;
  }

  void push(const char* role, const std::string& text) { out.push_back({{"role", role}, {"content", text}}); }
};

// Anthropic's tools ({name, description, input_schema}) in the templates' OpenAI form.
Json convert_tools(const Json& tools) {
  check_tool_list(tools);
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) bad(at, at + " must be an object");
    if (const Json* type = field(t, "type"); type && *type != "custom")
      bad(at + ".type", "server tools ('" + (type->is_string() ? type->get<std::string>() : type->dump()) +
                            "') are not supported: only client tools with an input_schema");
    only_fields(t, {"type", "name", "description", "input_schema", "cache_control", "eager_input_streaming", "strict"}, at);
    boolean(t, "strict", at);  // checked in tool_choice: only a forced call holds inputs to the schema
    const std::string& name = required_string(t, "name", at);
    const Json* schema = field(t, "input_schema");
    if (!schema || !schema->is_object()) bad(at + ".input_schema", at + " needs an 'input_schema' object");
    Json function = {{"name", name}};
    if (const Json* d = field(t, "description")) {
      if (!d->is_string()) bad(at + ".description", at + ".description must be a string");
      function["description"] = *d;
    }
    function["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// Whether tool calls are to be parsed, and (any / tool) the call the reply must make.
void tool_choice(const Json& body, MessageParams& p) {
  const bool have_tools = !p.chat.tools.is_null();
  p.parse_tools = have_tools;
  if (const Json* choice = field(body, "tool_choice")) {
    const std::string type = type_of(*choice, "tool_choice");
    if (type == "none") {
      only_fields(*choice, {"type"}, "tool_choice");
      p.parse_tools = false;
    } else if (type == "auto") {
      only_fields(*choice, {"type", "disable_parallel_tool_use"}, "tool_choice");
      if (boolean(*choice, "disable_parallel_tool_use", "tool_choice").value_or(false) && have_tools)
        bad("tool_choice.disable_parallel_tool_use",
            "disable_parallel_tool_use is enforced with tool_choice any or tool (auto may reply with several calls)");
    } else if (type == "any" || type == "tool") {
      only_fields(*choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
      const bool single = boolean(*choice, "disable_parallel_tool_use", "tool_choice").value_or(false);
      if (!have_tools) bad("tool_choice", "tool_choice '" + type + "' forces a call, but the request has no 'tools'");
      p.forcing = type == "any" ? ToolForcing{ToolForcing::Mode::Required, "", single}
                                : ToolForcing{ToolForcing::Mode::Named, required_string(*choice, "name", "tool_choice"), true};
      p.format = tool_forcing_format(p.chat.tools, *p.forcing, "tool_choice.name");
    } else {
      bad("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
    }
  }
  if (p.forcing || !field(body, "tools")) return;
  const Json& tools = body["tools"];
  for (size_t i = 0; i < tools.size(); ++i)
    if (const Json* strict = tools[i].is_object() ? field(tools[i], "strict") : nullptr; strict && *strict == true)
      bad("tools[" + std::to_string(i) + "].strict",
          "strict tool inputs are enforced when the call is forced (tool_choice any or tool); with auto send strict: "
          "false");
}

// thinking: the template's enable_thinking switch; budget_tokens checked, not enforced.
void thinking(const Json& body, MessageParams& p) {
  const Json* t = field(body, "thinking");
  if (!t) return;
  const std::string type = type_of(*t, "thinking");
  if (type == "disabled") {
    only_fields(*t, {"type"}, "thinking");
    p.chat.kwargs["enable_thinking"] = false;
    return;
  }
  if (type != "enabled" && type != "adaptive") bad("thinking.type", "'thinking.type' must be enabled, adaptive or disabled");
  only_fields(*t, {"type", "budget_tokens", "display"}, "thinking");
  if (type == "enabled") {
    p.thinking_budget = integer(*t, "budget_tokens", 1, std::numeric_limits<int32_t>::max(), "thinking");
    if (!p.thinking_budget) bad("thinking.budget_tokens", "thinking of type 'enabled' needs 'budget_tokens'");
    p.chat.kwargs["enable_thinking"] = true;
  } else if (field(*t, "budget_tokens")) {
    bad("thinking.budget_tokens", "'budget_tokens' goes with thinking of type 'enabled'");
  }
  // adaptive: the model decides, which is the template's default.
  if (auto display = string_field(*t, "display", "thinking")) {
    if (*display != "summarized" && *display != "omitted") bad("thinking.display", "'thinking.display' must be summarized or omitted");
    p.omit_thinking = *display == "omitted";
  }
}

MessageParams parse_conversation(const Json& body) {
  MessageParams p;
  if (auto model = string_field(body, "model")) p.model = *model;
  Converter c;
  if (const Json* system = field(body, "system")) c.push("system", text_content(*system, "system"));
  const Json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty()) bad("messages", "'messages' must be a non-empty list");
  if (messages->size() > kMaxMessages) too_many("messages", messages->size(), kMaxMessages, "messages");
  bool last_is_text_assistant = false, last_empty = false;
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const Json& m = (*messages)[i];
    if (!m.is_object()) bad(at, at + " must be an object");
    only_fields(m, {"role", "content"}, at);
    const std::string& role = required_string(m, "role", at);
    const Json* content = field(m, "content");
    if (!content || !(content->is_string() || content->is_array()))
      bad(at + ".content", at + ".content must be a string or a list of content blocks");
    if (role != "user" && role != "assistant")
      bad(at + ".role", "unknown role '" + role + "' (user or assistant; the system prompt is the 'system' field)");
    // An empty turn would vanish from the prompt, or render as a turn the model never saw.
    const bool empty = content->is_string() ? content->get_ref<const std::string&>().empty() : content->empty();
    if (empty && !(role == "assistant" && i + 1 == messages->size()))
      bad(at + ".content", at + ".content must not be empty (only a final assistant message may be)");
    if (role == "user") {
      c.user(*content, at + ".content");
      last_is_text_assistant = false;
    } else {
      last_is_text_assistant = c.assistant(*content, at + ".content");
      last_empty = empty;
    }
  }
  const Json& last = messages->back();
  if (last["role"] == "assistant") {
    if (last_empty) {
      c.out.erase(c.out.size() - 1);  // nothing to continue: an ordinary turn
    } else if (!last_is_text_assistant) {
      bad("messages", "a final assistant message can only be continued when it is text; send tool results in a user message");
    } else {
      p.chat.continue_final_message = "content";  // prefill: the reply continues it
    }
  }
  p.chat.messages = std::move(c.out);
  p.chat.add_generation_prompt = p.chat.continue_final_message.empty();
  if (const Json* tools = field(body, "tools")) {
    Json converted = convert_tools(*tools);
    if (!converted.empty()) p.chat.tools = std::move(converted);
  }
  tool_choice(body, p);
  thinking(body, p);
  return p;
}

}  // namespace

MessageParams parse_message_request(const Json& body) {
  only_fields(body, {"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p",
                     "top_k", "thinking", "tools", "tool_choice", "metadata", "service_tier", "cache_control"},
              "");
  MessageParams p = parse_conversation(body);
  const std::optional<int64_t> max_tokens = integer(body, "max_tokens", 1, int64_t{1} << 40);
  if (!max_tokens) bad("max_tokens", "'max_tokens' is required");
  p.max_tokens = *max_tokens;
  SamplingParams& s = p.generation.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", 0, 1).value_or(1.0));
  s.top_p = static_cast<float>(number(body, "top_p", 0, 1).value_or(1.0));
  if (s.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  s.top_k = static_cast<int>(integer(body, "top_k", 0, std::numeric_limits<int32_t>::max()).value_or(0));
  if (const Json* stop = field(body, "stop_sequences"))
    p.generation.stop = stop_strings(*stop, "stop_sequences", /*one_allowed=*/false);
  p.stream = boolean(body, "stream").value_or(false);
  // metadata (user_id) is for the provider's abuse tracking: nothing to do here.
  if (const Json* metadata = field(body, "metadata"); metadata && !metadata->is_object())
    bad("metadata", "'metadata' must be an object");
  // One tier serves everything, which satisfies both values.
  if (auto tier = string_field(body, "service_tier"); tier && *tier != "auto" && *tier != "standard_only")
    bad("service_tier", "'service_tier' must be auto or standard_only");
  return p;
}

MessageParams parse_count_tokens_request(const Json& body) {
  only_fields(body, {"model", "messages", "system", "thinking", "tools", "tool_choice", "cache_control"}, "");
  return parse_conversation(body);
}

void check_thinking_switch(const MessageParams& params, bool template_has_switch, bool template_reasons) {
  const auto it = params.chat.kwargs.find("enable_thinking");
  const std::optional<bool> enable = it == params.chat.kwargs.end() ? std::nullopt : std::optional<bool>(it->get<bool>());
  switch (thinking_problem(enable, params.thinking_budget.has_value(), template_has_switch, template_reasons)) {
    case ThinkingProblem::kCannotEnable:
      bad("thinking", "this model's chat template has no thinking switch (enable_thinking) and does not reason: "
                      "thinking cannot be enabled");
    case ThinkingProblem::kCannotDisable:
      bad("thinking", "this model's chat template reasons and has no thinking switch (enable_thinking): "
                      "thinking cannot be disabled");
    case ThinkingProblem::kBudgetUnreadable:
      bad("thinking.budget_tokens", "this model's chat template reasons in no format corvid reads: budget_tokens "
                                    "cannot be enforced");
    case ThinkingProblem::kNone: break;
  }
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:  // draining: retry later, as for an overloaded server
    case 529: return "overloaded_error";
    case 504: return "timeout_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

Json anthropic_error_body(int status, const std::string& message) {
  return Json{{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
}

bool is_anthropic_path(std::string_view path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0 || path.rfind("/v1/messages?", 0) == 0;
}

}  // namespace corvid::server
