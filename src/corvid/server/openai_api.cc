#include "corvid/server/openai_api.h"

#include <limits>

namespace corvid::server {

namespace {

constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxChoices = 16;  // n: each choice is a sequence of its own
constexpr size_t kMaxPromptTokens = size_t{1} << 20;

CommonParams parse_common(const Json& body, bool chat) {
  CommonParams p;
  if (const Json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    p.model = m->get<std::string>();
  }
  SamplingParams& s = p.generation.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", 0, 100).value_or(1.0));
  s.top_p = static_cast<float>(number(body, "top_p", 0, 1).value_or(1.0));
  if (s.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  const int64_t top_k = integer(body, "top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0);
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);  // -1 is vLLM's "off"
  s.min_p = static_cast<float>(number(body, "min_p", 0, 1).value_or(0.0));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2).value_or(0.0));
  s.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 1e-6, 100).value_or(1.0));
  if (const Json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  constexpr int64_t kHuge = int64_t{1} << 40;
  p.max_tokens = integer(body, "max_completion_tokens", 1, kHuge);
  if (!p.max_tokens) p.max_tokens = integer(body, "max_tokens", 1, kHuge);
  p.n = static_cast<int>(integer(body, "n", 1, kMaxChoices).value_or(1));
  if (integer(body, "best_of", 1, 128).value_or(1) != 1) bad("best_of", "best_of > 1 is not supported");
  if (const Json* stop = field(body, "stop")) p.generation.stop = stop_strings(*stop, "stop", /*one_allowed=*/true);
  p.generation.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  // Not applied yet: refused rather than silently ignored (an empty object is no bias).
  if (const Json* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
    if (!bias->empty()) bad("logit_bias", "'logit_bias' is not supported yet");
  }
  if (chat) {
    p.generation.logprobs = boolean(body, "logprobs").value_or(false);
    p.generation.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, kMaxTopLogprobs).value_or(0));
    if (p.generation.top_logprobs > 0 && !p.generation.logprobs)
      bad("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  } else {
    // Legacy completions: logprobs is the number of alternatives (0 = just the sampled token's).
    if (auto k = integer(body, "logprobs", 0, kMaxTopLogprobs)) {
      p.generation.logprobs = true;
      p.generation.top_logprobs = static_cast<int>(*k);
    }
  }
  p.stream = boolean(body, "stream").value_or(false);
  if (const Json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    only_fields(*options, {"include_usage"}, "stream_options");
    p.include_usage = boolean(*options, "include_usage").value_or(false);
  }
  if (const Json* user = field(body, "user"); user && !user->is_string()) bad("user", "'user' must be a string");
  return p;
}

// Fields that change nothing in the reply (OpenAI's bookkeeping): checked for type, then dropped.
void check_bookkeeping(const Json& body) {
  for (const char* key : {"service_tier", "prompt_cache_key", "safety_identifier"})
    if (const Json* v = field(body, key); v && !v->is_string()) bad(key, std::string("'") + key + "' must be a string");
  if (const Json* m = field(body, "metadata"); m && !m->is_object()) bad("metadata", "'metadata' must be an object");
  boolean(body, "store");
}

std::string join_text_parts(const Json& parts, size_t index) {
  std::string text;
  for (const Json& part : parts) {
    if (part.is_string()) {  // not OpenAI's shape, but unambiguous
      append_text(text, part.get<std::string>());
      continue;
    }
    const std::string param = "messages[" + std::to_string(index) + "].content";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(param, "each content part must be an object with a 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text") bad(param, "content parts of type '" + type + "' are not supported (text only)");
    if (!part.contains("text") || !part["text"].is_string()) bad(param, "a text content part needs a 'text' string");
    append_text(text, part["text"].get<std::string>());
  }
  return text;
}

}  // namespace

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

Json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  Json error = {{"message", message}, {"type", error_type(status)}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return Json{{"error", error}};
}

Json parse_body(const std::string& body) {
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object");
  return j;
}

Json normalize_messages(const Json& messages) {
  if (!messages.is_array() || messages.empty()) bad("messages", "'messages' must be a non-empty list");
  if (messages.size() > kMaxMessages) too_many("messages", messages.size(), kMaxMessages, "messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const Json& m = messages[i];
    if (!m.is_object()) bad(where, where + " must be an object");
    Json message = m;
    if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", where + " needs a 'role' string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name; templates know "system"
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad(where + ".role", "unknown role '" + role + "' (system, user, assistant or tool)");
    message["role"] = role;
    if (m.contains("content")) {
      const Json& c = m["content"];
      if (c.is_array()) {
        message["content"] = join_text_parts(c, i);
      } else if (!c.is_string() && !c.is_null()) {
        bad(where + ".content", where + ".content must be a string or a list of content parts");
      }
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) bad(where + ".tool_calls", where + ".tool_calls must be a list");
      for (Json& call : message["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          bad(where + ".tool_calls", "each tool call needs a 'function' object");
        Json& fn = call["function"];
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
          Json parsed = Json::parse(fn["arguments"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_object()) fn["arguments"] = std::move(parsed);
        }
      }
    }
    out.push_back(std::move(message));
  }
  return out;
}

ChatParams parse_chat_request(const Json& body) {
  only_fields(body, {"model", "messages", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                     "frequency_penalty", "repetition_penalty", "seed", "max_tokens", "max_completion_tokens", "n",
                     "best_of", "stop", "ignore_eos", "logit_bias", "logprobs", "top_logprobs", "stream",
                     "stream_options", "user", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
                     "response_format", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
                     "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
                     "guided_decoding_backend"});
  check_bookkeeping(body);
  ChatParams p;
  p.common = parse_common(body, /*chat=*/true);
  p.common.format =
      one_format(parse_response_format(field(body, "response_format"), "response_format"), parse_vllm_structured_outputs(body));
  if (!body.contains("messages")) bad("messages", "'messages' is required");
  p.chat.messages = normalize_messages(body["messages"]);
  p.chat.add_generation_prompt = true;
  if (const Json* tools = field(body, "tools")) {
    check_tool_list(*tools);
    for (const Json& t : *tools) {
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name"))
        bad("tools", "each tool needs a 'function' object with a 'name'");
    }
    if (!tools->empty()) p.chat.tools = *tools;
  }
  p.parse_tools = !p.chat.tools.is_null();
  // required and a named tool oblige the model to call: structured output holds the
  // reply to the tools' argument schemas (server/output_format.h).
  const bool parallel = boolean(body, "parallel_tool_calls").value_or(true);
  if (const Json* choice = field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c != "none" && c != "auto" && c != "required") bad("tool_choice", "'tool_choice' must be none, auto, required or a named tool");
      if (c == "none") p.parse_tools = false;
      if (c == "required") p.forcing = ToolForcing{ToolForcing::Mode::Required, "", !parallel};
    } else if (choice->is_object()) {
      only_fields(*choice, {"type", "function"}, "tool_choice");
      if (type_of(*choice, "tool_choice") != "function") bad("tool_choice.type", "'tool_choice.type' must be function");
      const Json* fn = field(*choice, "function");
      if (!fn || !fn->is_object()) bad("tool_choice.function", "'tool_choice.function' must be an object with a 'name'");
      only_fields(*fn, {"name"}, "tool_choice.function");
      p.forcing = ToolForcing{ToolForcing::Mode::Named, required_string(*fn, "name", "tool_choice.function"), true};
    } else {
      bad("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  if (p.forcing) {
    if (p.chat.tools.is_null()) bad("tool_choice", "'tool_choice' forces a call, but the request has no 'tools'");
    if (p.common.format) bad("tool_choice", "a forced tool call and response_format cannot both hold the reply");
    p.common.format = tool_forcing_format(p.chat.tools, *p.forcing, "tool_choice");
  } else if (!parallel && p.parse_tools) {
    // With tool_choice auto the model writes calls in its own format, which no format
    // here holds to one call.
    bad("parallel_tool_calls", "'parallel_tool_calls' false is supported with tool_choice required or a named "
                               "function (auto may reply with several calls)");
  }
  if (const Json* kwargs = field(body, "chat_template_kwargs")) {  // vLLM's extension (enable_thinking, ...)
    if (!kwargs->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    p.chat.kwargs = *kwargs;
  }
  return p;
}

CompletionParams parse_completion_request(const Json& body) {
  only_fields(body, {"model", "prompt", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                     "frequency_penalty", "repetition_penalty", "seed", "max_tokens", "n", "best_of", "stop",
                     "ignore_eos", "logit_bias", "logprobs", "stream", "stream_options", "user", "echo", "suffix",
                     "response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice",
                     "guided_grammar", "guided_decoding_backend"});
  CompletionParams p;
  p.common = parse_common(body, /*chat=*/false);
  p.common.format =
      one_format(parse_response_format(field(body, "response_format"), "response_format"), parse_vllm_structured_outputs(body));
  if (boolean(body, "echo").value_or(false)) bad("echo", "echo is not supported");
  if (const std::optional<std::string> suffix = string_field(body, "suffix"); suffix && !suffix->empty())
    bad("suffix", "'suffix' (fill in the middle) is not supported");
  const Json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "'prompt' is required");
  const Json* single = prompt;
  if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1) bad("prompt", "only one prompt per request is supported");
    single = &prompt->front();
  }
  if (single->is_string()) {
    p.prompt_text = single->get<std::string>();
  } else if (single->is_array()) {
    p.prompt_is_tokens = true;
    if (single->size() > kMaxPromptTokens) too_many("prompt", single->size(), kMaxPromptTokens, "tokens");
    for (const Json& id : *single) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad("prompt", "a token prompt must be a list of non-negative integers");
      p.prompt_tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else {
    bad("prompt", "'prompt' must be a string or a list of token ids");
  }
  return p;
}

}  // namespace corvid::server
