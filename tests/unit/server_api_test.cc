// The OpenAI request/response mapping of the server, without a model: request bodies
// to engine parameters, and engine events (with text a model of each family would
// write) to chat.completion / chunk objects, tool calls and reasoning included.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "corvid/server/metrics.h"
#include "corvid/server/openai_api.h"
#include "corvid/server/openai_reply.h"
#include "server_reply_script.h"

namespace corvid::server {
namespace {

using testing::finish_event;
using testing::hermes_with_think;
using testing::Scripted;
using testing::script;
using testing::text_event;

Json body(const char* text) { return parse_body(text); }

template <class F>
ApiError error_from(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "");
}

TEST(ServerApi, ChatRequestMapsEveryParameter) {
  const ChatParams p = parse_chat_request(body(R"({
    "model": "m", "messages": [{"role": "developer", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7, "max_completion_tokens": 33,
    "stop": "END", "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true},
    "chat_template_kwargs": {"enable_thinking": false}})"));
  const GenerationRequest& g = p.common.generation;
  EXPECT_EQ(p.common.model, "m");
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(g.sampling.min_p, 0.05f);
  EXPECT_EQ(g.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(g.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(g.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(p.common.max_tokens, 33);
  EXPECT_EQ(g.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 3);
  EXPECT_TRUE(p.common.stream);
  EXPECT_TRUE(p.common.include_usage);
  EXPECT_EQ(p.chat.messages[0]["role"], "system");
  EXPECT_EQ(p.chat.messages[1]["content"], "a\nb");
  EXPECT_EQ(p.chat.kwargs["enable_thinking"], false);
  EXPECT_TRUE(p.chat.add_generation_prompt);
  EXPECT_TRUE(p.chat.tools.is_null());
  EXPECT_FALSE(p.parse_tools);
}

TEST(ServerApi, DefaultsFollowOpenAI) {
  const ChatParams p = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": null})"));
  EXPECT_FLOAT_EQ(p.common.generation.sampling.temperature, 1.0f);
  EXPECT_FALSE(p.common.max_tokens.has_value());
  EXPECT_FALSE(p.common.generation.sampling.seed.has_value());
  EXPECT_FALSE(p.common.stream);
  EXPECT_TRUE(p.common.generation.stop.empty());
}

TEST(ServerApi, ToolsAndToolChoice) {
  const char* with_tools = R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})";
  const ChatParams p = parse_chat_request(body(with_tools));
  EXPECT_TRUE(p.parse_tools);
  ASSERT_TRUE(p.chat.tools.is_array());
  // Arguments sent as JSON text reach the template as an object (templates iterate them).
  EXPECT_EQ(p.chat.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(p.chat.messages[2]["role"], "tool");

  Json none = body(with_tools);
  none["tool_choice"] = "none";
  EXPECT_FALSE(parse_chat_request(none).parse_tools);
  none["tool_choice"] = "sometimes";
  EXPECT_EQ(error_from([&] { parse_chat_request(none); }).param(), "tool_choice");
}

TEST(ServerApi, BadParametersAreNamed) {
  auto param_of = [](const char* text) { return error_from([&] { parse_chat_request(body(text)); }).param(); };
  EXPECT_EQ(param_of(R"({"messages": []})"), "messages");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "robot", "content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"), "messages[0].content");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})"), "temperature");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "top_p": 1.5})"), "top_p");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})"), "stop");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "seed": 1.5})"), "seed");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "n": 0})"), "n");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "n": 17})"), "n");
  EXPECT_EQ(parse_chat_request(body(R"({"messages": [{"role": "user", "content": "x"}], "n": 3})")).common.n, 3);
  EXPECT_EQ(error_from([] { parse_body("{oops"); }).status(), 400);
  EXPECT_EQ(error_from([] { parse_body("[1, 2]"); }).status(), 400);
}

// A field corvid does not act on is a 400 naming it, never dropped; OpenAI's bookkeeping
// fields (which change no reply) are checked for type and accepted.
TEST(ServerApi, UnsupportedFieldsAreRefusedByName) {
  auto chat_error = [](const Json& extra) {
    Json b = body(R"({"messages": [{"role": "user", "content": "x"}]})");
    for (auto it = extra.begin(); it != extra.end(); ++it) b[it.key()] = it.value();
    return error_from([&] { parse_chat_request(b); });
  };
  auto chat_ok = [](const Json& extra) {
    Json b = body(R"({"messages": [{"role": "user", "content": "x"}]})");
    for (auto it = extra.begin(); it != extra.end(); ++it) b[it.key()] = it.value();
    return parse_chat_request(b);
  };
  const ApiError unknown = chat_error(body(R"({"frobnicate": 1})"));
  EXPECT_EQ(unknown.status(), 400);
  EXPECT_EQ(unknown.param(), "frobnicate");
  EXPECT_NE(std::string(unknown.what()).find("unknown field 'frobnicate'"), std::string::npos);
  EXPECT_EQ(chat_error(body(R"({"guided_decoding_backend": "outlines"})")).param(), "guided_decoding_backend");
  EXPECT_EQ(chat_error(body(R"({"stream_options": {"continuous_usage_stats": true}})")).param(),
            "stream_options.continuous_usage_stats");
  // Structured output: response_format, vLLM's structured_outputs and guided_* fields.
  ChatParams f = chat_ok(body(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_TRUE(f.common.format);
  EXPECT_EQ(f.common.format->kind, OutputFormat::Kind::Json);
  EXPECT_TRUE(f.common.format->object_only);
  f = chat_ok(body(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
                        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})"));
  ASSERT_TRUE(f.common.format);
  EXPECT_EQ(f.common.format->kind, OutputFormat::Kind::JsonSchema);
  EXPECT_EQ(Json::parse(f.common.format->spec), body(R"({"type": "object", "properties": {"a": {"type": "integer"}}})"));
  f = chat_ok(body(R"({"structured_outputs": {"regex": "[a-z]+"}})"));
  EXPECT_EQ(f.common.format->kind, OutputFormat::Kind::Regex);
  f = chat_ok(body(R"({"guided_choice": ["yes", "no \"way\""]})"));
  EXPECT_EQ(f.common.format->kind, OutputFormat::Kind::Grammar);
  EXPECT_EQ(f.common.format->spec, R"(root ::= "yes" | "no \"way\"")");
  f = chat_ok(body(R"({"guided_json": "{\"type\": \"string\"}", "guided_decoding_backend": "xgrammar"})"));
  EXPECT_EQ(Json::parse(f.common.format->spec), body(R"({"type": "string"})"));
  EXPECT_FALSE(chat_ok(body(R"({"response_format": {"type": "text"}})")).common.format);
  for (const auto& [patch, param] : std::vector<std::pair<const char*, const char*>>{
           {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})", "response_format.json_schema.name"},
           {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}})", "response_format.json_schema.schema"},
           {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "extra": 1}}})", "response_format.json_schema.extra"},
           {R"({"response_format": {"type": "yaml"}})", "response_format.type"},
           {R"({"response_format": "json"})", "response_format"},
           {R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})", "structured_outputs.choice"},
           {R"({"structured_outputs": {"json": {}}, "guided_regex": "a"})", "guided_regex"},
           {R"({"structured_outputs": {"whitespace_pattern": " "}})", "structured_outputs.whitespace_pattern"},
           {R"({"guided_choice": []})", "guided_choice"},
           {R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})", "response_format"}}) {
    const ApiError e = chat_error(body(patch));
    EXPECT_EQ(e.param(), param) << patch << ": " << e.what();
  }
  // tool_choice required / named hold the reply to the tools' schemas.
  const char* tools = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})";
  Json required = body(tools), named = body(tools), serial = body(tools);
  required["tool_choice"] = "required";
  named["tool_choice"] = body(R"({"type": "function", "function": {"name": "f"}})");
  serial["parallel_tool_calls"] = false;
  const ChatParams r = chat_ok(required);
  ASSERT_TRUE(r.forcing && r.common.format);
  EXPECT_EQ(r.forcing->mode, ToolForcing::Mode::Required);
  EXPECT_FALSE(r.forcing->single);
  EXPECT_EQ(Json::parse(r.common.format->spec)["minItems"], 1);
  const ChatParams n = chat_ok(named);
  ASSERT_TRUE(n.forcing);
  EXPECT_EQ(n.forcing->name, "f");
  EXPECT_EQ(Json::parse(n.common.format->spec), body(R"({"type": "object"})"));
  EXPECT_EQ(chat_error(serial).param(), "parallel_tool_calls");  // auto: the model's own format
  required["parallel_tool_calls"] = false;
  EXPECT_TRUE(chat_ok(required).forcing->single);
  EXPECT_EQ(Json::parse(chat_ok(required).common.format->spec)["maxItems"], 1);
  named["tool_choice"] = body(R"({"type": "function", "function": {"name": "g"}})");
  EXPECT_EQ(chat_error(named).param(), "tool_choice");
  EXPECT_EQ(chat_error(body(R"({"tool_choice": "required"})")).param(), "tool_choice");  // no tools
  required["response_format"] = body(R"({"type": "json_object"})");
  EXPECT_EQ(chat_error(required).param(), "tool_choice");
  serial["parallel_tool_calls"] = true;
  EXPECT_TRUE(chat_ok(serial).parse_tools);
  // Accepted: a text response_format and the bookkeeping fields.
  const ChatParams ok = chat_ok(body(R"({"response_format": {"type": "text"}, "user": "u", "metadata": {"k": "v"},
      "store": false, "service_tier": "auto", "prompt_cache_key": "p", "safety_identifier": "s"})"));
  EXPECT_EQ(ok.chat.messages.size(), 1u);
  EXPECT_EQ(chat_error(body(R"({"metadata": "v"})")).param(), "metadata");
  EXPECT_EQ(chat_error(body(R"({"user": 3})")).param(), "user");

  auto completion_error = [](const char* text) { return error_from([&] { parse_completion_request(body(text)); }); };
  EXPECT_EQ(completion_error(R"({"prompt": "a", "messages": []})").param(), "messages");
  EXPECT_EQ(completion_error(R"({"prompt": "a", "suffix": "b"})").param(), "suffix");
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": "a", "suffix": "", "user": "u"})")).prompt_text, "a");
}

// Every list a request carries has a bound (README "Request limits"): at the bound it is
// accepted, one past it is a 400 naming the field.
TEST(ServerApi, ListFieldsAreBounded) {
  auto chat = [](const Json& extra) {
    Json b = {{"messages", Json::array({{{"role", "user"}, {"content", "x"}}})}};
    b.update(extra);
    return b;
  };
  auto strings = [](size_t n, size_t bytes) { return Json(std::vector<std::string>(n, std::string(bytes, 's'))); };
  EXPECT_EQ(parse_chat_request(chat({{"stop", strings(16, 4)}})).common.generation.stop.size(), 16u);
  ApiError e = error_from([&] { parse_chat_request(chat({{"stop", strings(17, 4)}})); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "stop");
  EXPECT_NE(std::string(e.what()).find("at most 16"), std::string::npos) << e.what();
  EXPECT_NO_THROW(parse_chat_request(chat({{"stop", strings(4, 1024)}})));
  EXPECT_EQ(error_from([&] { parse_chat_request(chat({{"stop", strings(4, 1025)}})); }).param(), "stop");
  EXPECT_EQ(error_from([&] { parse_chat_request(chat({{"stop", std::string(4097, 's')}})); }).param(), "stop");
  // 100,000 stop strings (a request that was answered before).
  EXPECT_EQ(error_from([&] { parse_chat_request(chat({{"stop", strings(100000, 1)}})); }).param(), "stop");

  Json messages = Json::array();
  for (int i = 0; i < 10000; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "x"}});
  EXPECT_NO_THROW(parse_chat_request(Json{{"messages", messages}}));
  messages.push_back({{"role", "user"}, {"content", "x"}});
  EXPECT_EQ(error_from([&] { parse_chat_request(Json{{"messages", messages}}); }).param(), "messages");

  Json tools = Json::array();
  for (int i = 0; i < 512; ++i) {
    std::string name = std::to_string(i);  // (GCC 12 warns falsely on "f" + to_string here)
    name.insert(name.begin(), 'f');
    tools.push_back({{"type", "function"}, {"function", {{"name", name}}}});
  }
  EXPECT_NO_THROW(parse_chat_request(chat({{"tools", tools}})));
  tools.push_back({{"type", "function"}, {"function", {{"name", "one_more"}}}});
  EXPECT_EQ(error_from([&] { parse_chat_request(chat({{"tools", tools}})); }).param(), "tools");

  // logit_bias is not applied yet: refused, not ignored (an empty one is no bias).
  EXPECT_NO_THROW(parse_chat_request(chat({{"logit_bias", Json::object()}})));
  EXPECT_EQ(error_from([&] { parse_chat_request(chat({{"logit_bias", {{"42", 5}}}})); }).param(), "logit_bias");

  Json tokens = Json(std::vector<int>(size_t{1} << 20, 1));
  EXPECT_NO_THROW(parse_completion_request(Json{{"prompt", tokens}}));
  tokens.push_back(1);
  EXPECT_EQ(error_from([&] { parse_completion_request(Json{{"prompt", tokens}}); }).param(), "prompt");
}

TEST(ServerApi, CompletionPrompts) {
  CompletionParams p = parse_completion_request(body(R"({"prompt": "Once", "logprobs": 2, "stop": ["a", "b"]})"));
  EXPECT_EQ(p.prompt_text, "Once");
  EXPECT_FALSE(p.prompt_is_tokens);
  EXPECT_TRUE(p.common.generation.logprobs);
  EXPECT_EQ(p.common.generation.top_logprobs, 2);
  EXPECT_EQ(p.common.generation.stop.size(), 2u);
  p = parse_completion_request(body(R"({"prompt": [[1, 2, 3]]})"));
  EXPECT_TRUE(p.prompt_is_tokens);
  EXPECT_EQ(p.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": ["one"]})")).prompt_text, "one");
  EXPECT_EQ(error_from([] { parse_completion_request(body(R"({"prompt": ["a", "b"]})")); }).param(), "prompt");
  EXPECT_EQ(error_from([] { parse_completion_request(body(R"({"prompt": [-1]})")); }).param(), "prompt");
  EXPECT_EQ(error_from([] { parse_completion_request(body(R"({})")); }).param(), "prompt");
}

TEST(ServerApi, ErrorBodyHasOpenAIShape) {
  const Json e = error_body(429, "queue full");
  EXPECT_EQ(e.dump(), R"({"error":{"message":"queue full","type":"rate_limit_error","param":null,"code":null}})");
  EXPECT_EQ(error_body(401, "no", "", "invalid_api_key")["error"]["code"], "invalid_api_key");
  EXPECT_EQ(error_body(404, "x")["error"]["type"], "not_found_error");
  EXPECT_EQ(error_body(503, "x")["error"]["type"], "service_unavailable_error");
}

// What a Qwen3-style model writes when it reasons, then calls a tool.
const std::vector<std::string> kToolReply = {"<think>", "The user wants", " weather.</think>\n\n", "<tool_call>\n{\"name\": ",
                                             "\"get_weather\", \"arguments\": {\"city\": ", "\"Paris\"}}\n</tool_call>"};

TEST(ServerReply, ChatToolCallNonStreaming) {
  ChatReply reply({"chatcmpl-1", "m", 5}, hermes_with_think(), nullptr);
  for (const std::string& piece : kToolReply) reply.add(text_event(piece));
  reply.add(finish_event(FinishReason::Stop));
  ASSERT_TRUE(reply.finished());
  const Json r = reply.response();
  EXPECT_EQ(r["object"], "chat.completion");
  const Json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["reasoning_content"], "The user wants weather.");
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
  EXPECT_EQ(r["usage"]["total_tokens"], 17);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(ServerReply, ChatToolCallStreamingAddsUpToTheSameMessage) {
  ChatReply reply({"chatcmpl-1", "m", 5}, hermes_with_think(), nullptr);
  EXPECT_EQ(reply.role_chunk()["choices"][0]["delta"]["role"], "assistant");
  std::vector<Json> chunks;
  for (const std::string& piece : kToolReply)
    for (Json& c : reply.chunks(text_event(piece))) chunks.push_back(std::move(c));
  for (Json& c : reply.chunks(finish_event(FinishReason::Stop))) chunks.push_back(std::move(c));
  std::string reasoning, content, name, arguments, id;
  Json finish;
  for (const Json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const Json& choice = c["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      const Json& call = delta["tool_calls"][0];
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) id = call["id"];
      if (call["function"].contains("name")) name = call["function"]["name"];
      arguments += call["function"]["arguments"].get<std::string>();
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(reasoning, "The user wants weather.");
  EXPECT_EQ(content, "");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city":"Paris"})");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  const Json usage = reply.usage_chunk();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 17);
}

TEST(ServerReply, ChatWithoutToolParsingKeepsTheTextAsContent) {
  chat::OutputParserOptions plain;  // tool_choice "none": nothing is parsed
  ChatReply reply({"c", "m", 0}, plain, nullptr);
  reply.add(text_event("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"));
  reply.add(finish_event(FinishReason::Length));
  const Json r = reply.response();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
}

TEST(ServerReply, ChatLogprobs) {
  ChatReply reply({"c", "m", 0}, {}, nullptr);
  RequestEvent e = text_event("Hi", 42);
  e.logprobs = {-0.25f};
  e.top_logprobs = {{{42, -0.25f}, {7, -2.0f}}};
  const std::vector<Json> chunks = reply.chunks(e);
  ASSERT_EQ(chunks.size(), 1u);
  const Json& entry = chunks[0]["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(entry["token"], "42");  // without a tokenizer, the id stands in for the text
  EXPECT_FLOAT_EQ(entry["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(entry["top_logprobs"].size(), 2u);
  EXPECT_EQ(entry["top_logprobs"][1]["token"], "7");
}

TEST(ServerReply, CompletionStreamAndWhole) {
  CompletionReply streamed({"cmpl-1", "m", 0}, nullptr), whole({"cmpl-1", "m", 0}, nullptr);
  std::string text;
  for (const char* piece : {"Once", " upon", ""}) {
    for (const Json& c : streamed.chunks(text_event(piece))) text += c["choices"][0]["text"].get<std::string>();
    whole.add(text_event(piece));
  }
  const std::vector<Json> last = streamed.chunks(finish_event(FinishReason::Stop, " a"));
  whole.add(finish_event(FinishReason::Stop, " a"));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "stop");
  text += last[0]["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Once upon a");
  const Json r = whole.response();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "Once upon a");
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
}

TEST(ServerMetrics, PrometheusText) {
  Metrics m;
  m.count_response(200);
  m.count_response(429);
  m.observe_ttft(0.03);
  m.observe_ttft(100);
  m.observe_inter_token(0.012);
  EngineStats s;
  s.blocks_total = 10;
  s.blocks_used = 5;
  s.prefix_cache_queries = 8;
  s.prefix_cache_hits = 2;
  s.kv_groups = {{"full", 0, 6, 3, 1, 3}, {"sliding 512", 512, 4, 2, 0, 2}};
  const std::string text = m.render(s, "m");
  EXPECT_NE(text.find("# TYPE corvid_kv_group_blocks_used gauge\n"
                      "corvid_kv_group_blocks_used{model_name=\"m\",group=\"full\"} 3\n"
                      "corvid_kv_group_blocks_used{model_name=\"m\",group=\"sliding 512\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("corvid_kv_group_peak_blocks_per_sequence{model_name=\"m\",group=\"sliding 512\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("corvid_http_requests_total{code=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_kv_blocks_used{model_name=\"m\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_prefix_cache_hit_rate{model_name=\"m\"} 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_time_to_first_token_seconds_bucket{le=\"0.04\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_inter_token_latency_seconds_bucket{le=\"0.015\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("corvid_inter_token_latency_seconds_bucket{le=\"0.01\"} 0\n"), std::string::npos);
}

}  // namespace
}  // namespace corvid::server
