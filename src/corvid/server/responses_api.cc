#include "corvid/server/responses_api.h"

#include <map>

namespace corvid::server {

namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

// The item status a client may echo back from an earlier reply.
void check_status(const Json& item, const std::string& where) {
  if (auto s = string_field(item, "status", where); s && *s != "completed" && *s != "incomplete" && *s != "in_progress")
    bad(where + ".status", "'" + where + ".status' must be in_progress, completed or incomplete");
}

[[noreturn]] void unsupported_part(const std::string& type, const std::string& where) {
  if (type == "input_image" || type == "input_file" || type == "input_audio")
    bad(where, "'" + type + "' content is not supported yet: corvid serves text-only models (" + where + ")");
  bad(where, "content parts of type '" + type + "' are not supported (" + where + ")");
}

// A message's content as part lists: input_text for user/system/developer, output_text
// (an earlier reply's) for the assistant, as OpenAI stores them.
Json message_content(const Json& content, const std::string& role, const std::string& where) {
  const char* text_type = role == "assistant" ? "output_text" : "input_text";
  if (content.is_string()) return Json::array({{{"type", text_type}, {"text", content}}});
  if (!content.is_array()) bad(where, where + " must be a string or a list of content parts");
  Json out = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& part = content[i];
    const std::string type = type_of(part, at);
    if (type == "input_text" || (type == "output_text" && role == "assistant")) {
      only_fields(part, {"type", "text", "annotations", "logprobs"}, at);
      if (const Json* a = field(part, "annotations"); a && !(a->is_array() && a->empty()))
        bad(at + ".annotations", "annotations are not supported");
      out.push_back({{"type", type}, {"text", required_string(part, "text", at)}});
    } else if (type == "output_text") {
      bad(at, "'output_text' parts belong in assistant messages (" + at + ")");
    } else {
      unsupported_part(type, at);
    }
  }
  return out;
}

Json message_item(const Json& m, const std::string& where) {
  only_fields(m, {"type", "role", "content", "id", "status", "phase"}, where);
  const std::string& role = required_string(m, "role", where);
  if (role != "user" && role != "assistant" && role != "system" && role != "developer")
    bad(where + ".role", "unknown role '" + role + "' (user, assistant, system or developer)");
  check_status(m, where);
  const Json* content = field(m, "content");
  if (!content) bad(where + ".content", where + " needs a 'content'");
  Json item = {{"type", "message"}, {"role", role}, {"content", message_content(*content, role, where + ".content")}};
  if (auto id = string_field(m, "id", where)) item["id"] = *id;
  return item;
}

Json function_call_item(const Json& c, const std::string& where) {
  only_fields(c, {"type", "id", "call_id", "name", "arguments", "status"}, where);
  check_status(c, where);
  Json item = {{"type", "function_call"},
               {"call_id", required_string(c, "call_id", where)},
               {"name", required_string(c, "name", where)},
               {"arguments", required_string(c, "arguments", where)}};
  if (auto id = string_field(c, "id", where)) item["id"] = *id;
  return item;
}

// A tool's output: a string, or input_text parts (joined as the templates take text).
Json function_call_output_item(const Json& o, const std::string& where) {
  only_fields(o, {"type", "id", "call_id", "output", "status"}, where);
  check_status(o, where);
  const Json* output = field(o, "output");
  if (!output) bad(where + ".output", where + " needs an 'output'");
  std::string text;
  if (output->is_string()) {
    text = output->get<std::string>();
  } else if (output->is_array()) {
    for (size_t i = 0; i < output->size(); ++i) {
      const std::string at = where + ".output[" + std::to_string(i) + "]";
      const std::string type = type_of((*output)[i], at);
      if (type != "input_text") unsupported_part(type, at);
      only_fields((*output)[i], {"type", "text"}, at);
      append_text(text, required_string((*output)[i], "text", at));
    }
  } else {
    bad(where + ".output", where + ".output must be a string or a list of input_text parts");
  }
  Json item = {{"type", "function_call_output"}, {"call_id", required_string(o, "call_id", where)}, {"output", text}};
  if (auto id = string_field(o, "id", where)) item["id"] = *id;
  return item;
}

// Text parts of one kind ({type, text}) from a reasoning item's summary or content.
Json reasoning_parts(const Json& r, const char* key, const char* part_type, const std::string& where) {
  Json out = Json::array();
  const Json* parts = field(r, key);
  if (!parts) return out;
  const std::string at = where + "." + key;
  if (!parts->is_array()) bad(at, at + " must be a list");
  for (size_t i = 0; i < parts->size(); ++i) {
    const std::string p = at + "[" + std::to_string(i) + "]";
    if (type_of((*parts)[i], p) != part_type) bad(p + ".type", "'" + p + ".type' must be " + part_type);
    only_fields((*parts)[i], {"type", "text"}, p);
    out.push_back({{"type", part_type}, {"text", required_string((*parts)[i], "text", p)}});
  }
  return out;
}

// encrypted_content is another server's sealed reasoning: nothing a template could show.
Json reasoning_item(const Json& r, const std::string& where) {
  only_fields(r, {"type", "id", "summary", "content", "encrypted_content", "status"}, where);
  check_status(r, where);
  if (!field(r, "summary")) bad(where + ".summary", where + " needs a 'summary' list");
  Json item = {{"type", "reasoning"},
               {"summary", reasoning_parts(r, "summary", "summary_text", where)},
               {"content", reasoning_parts(r, "content", "reasoning_text", where)}};
  if (auto id = string_field(r, "id", where)) item["id"] = *id;
  return item;
}

// Responses' function tools ({type, name, description, parameters, strict}) in the
// templates' OpenAI form.
Json convert_tools(const Json& tools) {
  check_tool_list(tools);
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    const std::string type = type_of(t, at);
    if (type != "function")
      bad(at + ".type", "tools of type '" + type + "' are not supported: only function tools (the client runs them)");
    only_fields(t, {"type", "name", "description", "parameters", "strict"}, at);
    boolean(t, "strict", at);  // checked in parse_tool_choice: only a forced call holds arguments to the schema
    Json function = {{"name", required_string(t, "name", at)}};
    if (auto d = string_field(t, "description", at)) function["description"] = *d;
    if (const Json* p = field(t, "parameters")) {
      if (!p->is_object()) bad(at + ".parameters", at + ".parameters must be an object");
      function["parameters"] = *p;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

void parse_tool_choice(const Json& body, ResponseParams& p) {
  const Json* choice = field(body, "tool_choice");
  p.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);
  if (choice && choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c != "auto" && c != "none" && c != "required") bad("tool_choice", "'tool_choice' must be auto, none or required");
    if (c == "required") p.forcing = ToolForcing{ToolForcing::Mode::Required, "", !p.parallel_tool_calls};
    p.tool_choice = c;
  } else if (choice && choice->is_object()) {
    const std::string type = type_of(*choice, "tool_choice");
    if (type != "function")
      bad("tool_choice", "tool_choice of type '" + type + "' is not supported (auto, none, required or a function)");
    only_fields(*choice, {"type", "name"}, "tool_choice");
    p.forcing = ToolForcing{ToolForcing::Mode::Named, required_string(*choice, "name", "tool_choice"), true};
    p.tool_choice = *choice;
  } else if (choice) {
    bad("tool_choice", "'tool_choice' must be a string or an object");
  }
  p.parse_tools = !p.chat_tools.is_null() && p.tool_choice != "none";
  if (p.forcing) {
    if (p.chat_tools.is_null()) bad("tool_choice", "'tool_choice' forces a call, but the request has no 'tools'");
    if (p.format) bad("tool_choice", "a forced tool call and text.format cannot both hold the reply");
    p.format = tool_forcing_format(p.chat_tools, *p.forcing, "tool_choice");
    return;
  }
  if (!p.parallel_tool_calls && p.parse_tools)
    bad("parallel_tool_calls", "parallel_tool_calls false is supported with tool_choice required or a named function "
                               "(auto may reply with several calls)");
  for (size_t i = 0; i < p.tools.size(); ++i)
    if (const Json* strict = p.tools[i].is_object() ? field(p.tools[i], "strict") : nullptr; strict && *strict == true)
      bad("tools[" + std::to_string(i) + "].strict",
          "strict function arguments are enforced when the call is forced (tool_choice required or this function); "
          "with tool_choice auto send strict: false");
}

void parse_reasoning(const Json& body, ResponseParams& p) {
  const Json* r = field(body, "reasoning");
  if (!r) return;
  if (!r->is_object()) bad("reasoning", "'reasoning' must be an object");
  only_fields(*r, {"effort", "summary", "generate_summary"}, "reasoning");
  if ((p.effort = string_field(*r, "effort", "reasoning"))) {
    static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool ok = false;
    for (const char* e : kEfforts) ok = ok || *p.effort == e;
    if (!ok) bad("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high, xhigh or max");
  }
  // corvid has no summariser: "auto" (the best summary there is) gets none, and the
  // reasoning comes back whole as the item's content; a kind of summary is refused.
  for (const char* key : {"summary", "generate_summary"}) {
    if (auto s = string_field(*r, key, "reasoning")) {
      if (*s != "auto")
        bad(std::string("reasoning.") + key, "reasoning summaries ('" + *s +
                                                 "') are not supported: corvid returns the reasoning itself as the "
                                                 "item's content; use 'auto' or leave it out");
      p.summary = *s;
    }
  }
}

// text.format: text, json_object or json_schema (held to by structured output).
void parse_text(const Json& body, ResponseParams& p) {
  const Json* text = field(body, "text");
  if (!text) return;
  if (!text->is_object()) bad("text", "'text' must be an object");
  only_fields(*text, {"format"}, "text");
  const Json* format = field(*text, "format");
  if (!format) return;
  p.format = parse_response_format(format, "text.format");
  p.text = Json{{"format", *format}};
}

}  // namespace

Json normalize_input(const Json& input) {
  if (input.is_string()) return Json::array({{{"type", "message"}, {"role", "user"},
                                              {"content", Json::array({{{"type", "input_text"}, {"text", input}}})}}});
  if (!input.is_array() || input.empty()) bad("input", "'input' must be a string or a non-empty list of items");
  if (input.size() > kMaxMessages) too_many("input", input.size(), kMaxMessages, "items");
  Json out = Json::array();
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string at = "input[" + std::to_string(i) + "]";
    const Json& item = input[i];
    if (!item.is_object()) bad(at, at + " must be an object");
    // A message may leave its type out (EasyInputMessage).
    const std::string type = field(item, "type") ? type_of(item, at) : "message";
    if (type == "message") out.push_back(message_item(item, at));
    else if (type == "function_call") out.push_back(function_call_item(item, at));
    else if (type == "function_call_output") out.push_back(function_call_output_item(item, at));
    else if (type == "reasoning") out.push_back(reasoning_item(item, at));
    else if (type == "item_reference") bad(at + ".type", "item references are not supported: send the item itself, or chain with previous_response_id");
    else bad(at + ".type", "input items of type '" + type + "' are not supported (message, function_call, function_call_output, reasoning)");
  }
  return out;
}

Json items_to_messages(const Json& items, const std::optional<std::string>& instructions) {
  Json out = Json::array();
  if (instructions) out.push_back({{"role", "system"}, {"content", *instructions}});
  std::string reasoning;  // of a reasoning item, waiting for its assistant message
  std::map<std::string, std::string> call_names;  // call_id -> name
  auto join = [](const Json& parts) {
    std::string text;
    for (const Json& part : parts) append_text(text, part.value("text", ""));
    return text;
  };
  // The assistant message the next output belongs to: a new one after anything else.
  auto assistant = [&](bool reuse) -> Json& {
    if (!(reuse && reasoning.empty() && !out.empty() && out.back()["role"] == "assistant")) {
      Json m = {{"role", "assistant"}, {"content", ""}};
      if (!reasoning.empty()) m["reasoning_content"] = reasoning;
      reasoning.clear();
      out.push_back(std::move(m));
    }
    return out.back();
  };
  for (const Json& item : items) {
    const std::string type = item.value("type", "message");
    if (type == "message") {
      std::string role = item.value("role", "user");
      const std::string text = join(item.value("content", Json::array()));
      if (role == "assistant") {
        assistant(false)["content"] = text;
        continue;
      }
      out.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
    } else if (type == "reasoning") {
      const Json content = item.value("content", Json::array());
      append_text(reasoning, join(content.empty() ? item.value("summary", Json::array()) : content));
    } else if (type == "function_call") {
      Json& m = assistant(true);  // the calls of one turn gather on its message
      const std::string args = item.value("arguments", "");
      Json parsed = Json::parse(args, nullptr, /*allow_exceptions=*/false);
      Json fn = {{"name", item.value("name", "")}, {"arguments", parsed.is_object() ? parsed : Json(args)}};
      if (!m.contains("tool_calls")) m["tool_calls"] = Json::array();
      m["tool_calls"].push_back({{"id", item.value("call_id", "")}, {"type", "function"}, {"function", std::move(fn)}});
      call_names[item.value("call_id", "")] = item.value("name", "");
    } else if (type == "function_call_output") {
      const std::string id = item.value("call_id", "");
      Json m = {{"role", "tool"}, {"tool_call_id", id}, {"content", item.value("output", "")}};
      if (auto name = call_names.find(id); name != call_names.end()) m["name"] = name->second;
      out.push_back(std::move(m));
    }
  }
  if (!reasoning.empty()) assistant(false);  // reasoning with nothing after it
  return out;
}

ResponseParams parse_response_request(const Json& body) {
  only_fields(body, {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
                     "max_output_tokens", "temperature", "top_p", "stream", "stream_options", "reasoning", "metadata",
                     "user", "safety_identifier", "prompt_cache_key", "text", "store", "previous_response_id",
                     "include", "truncation", "service_tier", "background"});
  ResponseParams p;
  if (auto model = string_field(body, "model")) p.model = *model;
  const Json* input = field(body, "input");
  if (!input) bad("input", "'input' is required");
  p.input = normalize_input(*input);
  p.instructions = string_field(body, "instructions");
  if (const Json* tools = field(body, "tools")) {
    Json converted = convert_tools(*tools);
    p.tools = *tools;
    if (!converted.empty()) p.chat_tools = std::move(converted);
  }
  parse_text(body, p);
  parse_tool_choice(body, p);
  p.max_output_tokens = integer(body, "max_output_tokens", 1, kHuge);
  SamplingParams& s = p.generation.sampling;
  p.temperature = number(body, "temperature", 0, 2).value_or(1.0);
  p.top_p = number(body, "top_p", 0, 1).value_or(1.0);
  s.temperature = static_cast<float>(p.temperature);
  s.top_p = static_cast<float>(p.top_p);
  if (s.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  p.stream = boolean(body, "stream").value_or(false);
  if (const Json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    // Obfuscation pads deltas against length side channels on OpenAI's network: corvid never adds it.
    only_fields(*options, {"include_obfuscation"}, "stream_options");
    boolean(*options, "include_obfuscation", "stream_options");
  }
  parse_reasoning(body, p);
  if (const Json* m = field(body, "metadata")) {
    if (!m->is_object()) bad("metadata", "'metadata' must be an object");
    for (auto it = m->begin(); it != m->end(); ++it)
      if (!it->is_string()) bad("metadata", "'metadata' values must be strings");
    p.metadata = *m;
  }
  p.user = string_field(body, "user");
  p.safety_identifier = string_field(body, "safety_identifier");
  p.prompt_cache_key = string_field(body, "prompt_cache_key");  // the prefix cache is automatic
  p.store = boolean(body, "store").value_or(true);
  if (auto prev = string_field(body, "previous_response_id")) p.previous_response_id = *prev;
  if (const Json* include = field(body, "include")) {
    if (!include->is_array()) bad("include", "'include' must be a list");
    if (!include->empty())
      bad("include", "'include' " + (*include)[0].dump() + " is not supported (corvid has no extra output to add)");
  }
  if (auto t = string_field(body, "truncation"); t && *t != "disabled")
    bad("truncation", "truncation '" + *t + "' is not supported: a conversation too long for the context is a 400");
  if (auto tier = string_field(body, "service_tier"); tier && *tier != "auto" && *tier != "default")
    bad("service_tier", "'service_tier' must be auto or default (one tier serves everything)");
  if (boolean(body, "background").value_or(false))
    bad("background", "background responses are not supported: the request runs while the connection is open");
  return p;
}

std::optional<int64_t> apply_effort(const std::optional<std::string>& effort, bool template_reads_effort,
                                    ChatRequest& chat) {
  if (!effort) return std::nullopt;
  const std::string& e = *effort;
  if (e == "none") {
    chat.kwargs["enable_thinking"] = false;
    return std::nullopt;
  }
  if (template_reads_effort) {
    chat.kwargs["reasoning_effort"] = e == "minimal" ? "low" : (e == "xhigh" || e == "max") ? "high" : e;
    return std::nullopt;
  }
  chat.kwargs["enable_thinking"] = true;
  if (e == "minimal") return 256;
  if (e == "low") return 1024;
  if (e == "medium") return 4096;
  return std::nullopt;
}

void check_effort(const ChatRequest& chat, bool budget, bool template_has_switch, bool template_reasons) {
  const auto it = chat.kwargs.find("enable_thinking");
  const std::optional<bool> enable = it == chat.kwargs.end() ? std::nullopt : std::optional<bool>(it->get<bool>());
  switch (thinking_problem(enable, budget, template_has_switch, template_reasons)) {
    case ThinkingProblem::kCannotEnable:
      bad("reasoning.effort", "this model's chat template has no thinking switch (enable_thinking) and does not "
                              "reason: reasoning cannot be turned on");
    case ThinkingProblem::kCannotDisable:
      bad("reasoning.effort", "this model's chat template reasons and has no thinking switch (enable_thinking): "
                              "effort 'none' cannot turn reasoning off");
    case ThinkingProblem::kBudgetUnreadable:
      bad("reasoning.effort", "this model's chat template reasons in no format corvid reads: the effort's reasoning "
                              "budget cannot be enforced");
    case ThinkingProblem::kNone: break;
  }
}

}  // namespace corvid::server
