// The Anthropic Messages mapping of the server, without a model: request bodies to the
// template's messages and the engine's parameters (every block kind, every refusal),
// and scripted engine events to Anthropic's content blocks and SSE event sequence.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "corvid/server/anthropic_api.h"
#include "corvid/server/anthropic_reply.h"
#include "corvid/server/openai_api.h"
#include "server_reply_script.h"

namespace corvid::server {
namespace {

using testing::finish_event;
using testing::hermes_with_think;
using testing::Scripted;
using testing::script;
using testing::text_event;

Json body(const char* text) { return Json::parse(text); }

// The 400 a body gets, or a failure when it is accepted.
ApiError refusal(const Json& b, bool count_tokens = false) {
  try {
    if (count_tokens) {
      parse_count_tokens_request(b);
    } else {
      parse_message_request(b);
    }
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e;
  }
  ADD_FAILURE() << "accepted: " << b.dump();
  return ApiError(0, "");
}

// A valid request with `extra` merged in (a null value removes the key).
Json request(const char* extra = "{}") {
  Json b = body(R"({"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]})");
  b.merge_patch(body(extra));
  return b;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(AnthropicApi, MessageRequestMapsEveryField) {
  const MessageParams p = parse_message_request(body(R"({
    "model": "m", "max_tokens": 99, "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}},
                                               {"type": "text", "text": "be kind"}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": "c"},
                 {"role": "user", "content": "d"}],
    "temperature": 0.25, "top_p": 0.5, "top_k": 7, "stop_sequences": ["END", "", "STOP"], "stream": true,
    "metadata": {"user_id": "u1"}, "service_tier": "auto", "cache_control": {"type": "ephemeral"},
    "thinking": {"type": "enabled", "budget_tokens": 2048}})"));
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.max_tokens, 99);
  EXPECT_TRUE(p.stream);
  EXPECT_FLOAT_EQ(p.generation.sampling.temperature, 0.25f);
  EXPECT_FLOAT_EQ(p.generation.sampling.top_p, 0.5f);
  EXPECT_EQ(p.generation.sampling.top_k, 7);
  EXPECT_EQ(p.generation.stop, (std::vector<std::string>{"END", "STOP"}));
  const Json want = body(R"([{"role": "system", "content": "be brief\nbe kind"}, {"role": "user", "content": "a\nb"},
                             {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}])");
  EXPECT_EQ(Json(p.chat.messages), want);
  EXPECT_TRUE(p.chat.add_generation_prompt);
  EXPECT_TRUE(p.chat.continue_final_message.empty());
  EXPECT_EQ(p.chat.kwargs["enable_thinking"], true);
  EXPECT_EQ(p.thinking_budget, 2048);
  EXPECT_TRUE(p.chat.tools.is_null());
  EXPECT_FALSE(p.parse_tools);
}

TEST(AnthropicApi, DefaultsLeaveTheTemplateAlone) {
  const MessageParams p = parse_message_request(request());
  EXPECT_FLOAT_EQ(p.generation.sampling.temperature, 1.0f);
  EXPECT_EQ(p.generation.sampling.top_k, 0);
  EXPECT_FALSE(p.stream);
  EXPECT_TRUE(p.chat.kwargs.empty());  // no thinking field: the template's own default
  EXPECT_FALSE(p.thinking_budget.has_value());
  EXPECT_FALSE(p.omit_thinking);
}

constexpr const char* kToolHistory = R"({"model": "m", "max_tokens": 32,
  "tools": [{"name": "get_weather", "description": "The weather of a city",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}, "cache_control": {"type": "ephemeral"}},
            {"type": "custom", "name": "get_time", "input_schema": {"type": "object"}}],
  "messages": [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Two cities.", "signature": "sig"},
      {"type": "redacted_thinking", "data": "opaque"},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
      {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}, "caller": {"type": "direct"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
      {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no data"}], "is_error": true},
      {"type": "text", "text": "Thanks."}]}]})";

TEST(AnthropicApi, ToolUseAndToolResultBecomeTheTemplatesToolMessages) {
  const MessageParams p = parse_message_request(body(kToolHistory));
  EXPECT_TRUE(p.parse_tools);
  const Json tools = body(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])");
  EXPECT_EQ(Json(p.chat.tools), tools);
  const Json want = body(R"([
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "Two cities.", "tool_calls": [
      {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
      {"id": "toolu_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny", "name": "get_weather"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no data", "name": "get_weather"},
    {"role": "user", "content": "Thanks."}])");
  EXPECT_EQ(Json(p.chat.messages), want);
}

TEST(AnthropicApi, ToolChoice) {
  const char* tools = R"({"tools": [{"name": "f", "input_schema": {"type": "object"}}]})";
  Json b = request(tools);
  EXPECT_TRUE(parse_message_request(b).parse_tools);
  b["tool_choice"] = body(R"({"type": "auto", "disable_parallel_tool_use": false})");
  EXPECT_TRUE(parse_message_request(b).parse_tools);
  b["tool_choice"] = body(R"({"type": "none"})");
  const MessageParams none = parse_message_request(b);
  EXPECT_FALSE(none.parse_tools);
  EXPECT_FALSE(none.chat.tools.is_null());  // the template still shows them, as OpenAI's "none"
  // any / tool force a call: the reply is held to the tools' input schemas.
  b["tool_choice"] = body(R"({"type": "any", "disable_parallel_tool_use": true})");
  const MessageParams any = parse_message_request(b);
  ASSERT_TRUE(any.forcing && any.format);
  EXPECT_EQ(any.forcing->mode, ToolForcing::Mode::Required);
  EXPECT_TRUE(any.forcing->single);
  b["tool_choice"] = body(R"({"type": "tool", "name": "f"})");
  const MessageParams one = parse_message_request(b);
  ASSERT_TRUE(one.forcing);
  EXPECT_EQ(one.forcing->name, "f");
  EXPECT_EQ(Json::parse(one.format->spec), body(R"({"type": "object"})"));
  b["tool_choice"] = body(R"({"type": "tool", "name": "g"})");
  EXPECT_EQ(refusal(b).param(), "tool_choice.name");
  EXPECT_EQ(refusal(request(R"({"tool_choice": {"type": "any"}})")).param(), "tool_choice");  // no tools
  b["tool_choice"] = body(R"({"type": "auto", "disable_parallel_tool_use": true})");
  EXPECT_EQ(refusal(b).param(), "tool_choice.disable_parallel_tool_use");
  b["tool_choice"] = body(R"({"type": "sometimes"})");
  EXPECT_EQ(refusal(b).param(), "tool_choice.type");
  b["tool_choice"] = "auto";
  EXPECT_EQ(refusal(b).param(), "tool_choice");
  // No tools: nothing to parse, whatever the choice.
  EXPECT_FALSE(parse_message_request(request(R"({"tool_choice": {"type": "auto"}})")).parse_tools);
}

TEST(AnthropicApi, ThinkingSwitch) {
  MessageParams p = parse_message_request(request(R"({"thinking": {"type": "disabled"}})"));
  EXPECT_EQ(p.chat.kwargs["enable_thinking"], false);
  p = parse_message_request(request(R"({"thinking": {"type": "adaptive"}})"));
  EXPECT_FALSE(p.chat.kwargs.contains("enable_thinking"));
  p = parse_message_request(request(R"({"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}})"));
  EXPECT_TRUE(p.omit_thinking);
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "enabled"}})")).param(), "thinking.budget_tokens");
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "enabled", "budget_tokens": 0}})")).param(), "thinking.budget_tokens");
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "adaptive", "budget_tokens": 5}})")).param(), "thinking.budget_tokens");
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "on"}})")).param(), "thinking.type");
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "disabled", "budget_tokens": 5}})")).param(), "thinking.budget_tokens");
  EXPECT_EQ(refusal(request(R"({"thinking": {"type": "enabled", "budget_tokens": 9, "display": "full"}})")).param(),
            "thinking.display");
}

TEST(AnthropicApi, ThinkingSwitchTheTemplateCannotHonourIsRefused) {
  const MessageParams on = parse_message_request(request(R"({"thinking": {"type": "enabled", "budget_tokens": 9}})"));
  const MessageParams off = parse_message_request(request(R"({"thinking": {"type": "disabled"}})"));
  const MessageParams adaptive = parse_message_request(request(R"({"thinking": {"type": "adaptive"}})"));
  for (const MessageParams* p : {&on, &off, &adaptive}) check_thinking_switch(*p, /*template_has_switch=*/true, /*template_reasons=*/true);  // Qwen3's kind
  check_thinking_switch(off, true, false);
  check_thinking_switch(adaptive, true, false);
  check_thinking_switch(off, false, false);      // SmolLM2's: never thinks, so "disabled" holds
  check_thinking_switch(on, false, true);        // always reasons (DeepSeek-R1's kind): "enabled" holds
  check_thinking_switch(adaptive, false, false);
  check_thinking_switch(adaptive, false, true);
  try {
    check_thinking_switch(on, false, false);
    ADD_FAILURE() << "enabled on a template that cannot think";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "thinking");
    EXPECT_TRUE(contains(e.what(), "cannot be enabled")) << e.what();
  }
  try {
    check_thinking_switch(off, false, true);
    ADD_FAILURE() << "disabled on a template that always reasons";
  } catch (const ApiError& e) {
    EXPECT_TRUE(contains(e.what(), "cannot be disabled")) << e.what();
  }
  try {  // a switch but no reasoning format corvid reads: nothing to close at the budget
    check_thinking_switch(on, true, false);
    ADD_FAILURE() << "a budget where the reasoning cannot be told apart";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "thinking.budget_tokens");
  }
}

TEST(AnthropicApi, FinalAssistantTextIsContinued) {
  MessageParams p = parse_message_request(request(R"({"messages": [{"role": "user", "content": "Count"},
                                                                     {"role": "assistant", "content": "1, 2,"}]})"));
  EXPECT_EQ(p.chat.continue_final_message, "content");
  EXPECT_FALSE(p.chat.add_generation_prompt);
  EXPECT_EQ(p.chat.messages.back()["content"], "1, 2,");
  // An empty final assistant message has nothing to continue: an ordinary turn.
  p = parse_message_request(request(R"({"messages": [{"role": "user", "content": "Count"}, {"role": "assistant", "content": []}]})"));
  EXPECT_TRUE(p.chat.continue_final_message.empty());
  EXPECT_TRUE(p.chat.add_generation_prompt);
  EXPECT_EQ(p.chat.messages.size(), 1u);
  EXPECT_EQ(refusal(request(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
                                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})")).param(),
            "messages");
}

TEST(AnthropicApi, EveryRefusalNamesItsField) {
  const struct {
    const char* patch;
    const char* param;
    const char* says;
  } cases[] = {
      {R"({"max_tokens": null})", "max_tokens", "required"},
      {R"({"max_tokens": 0})", "max_tokens", "max_tokens"},
      {R"({"max_tokens": "lots"})", "max_tokens", "integer"},
      {R"({"frequency_penalty": 0.5})", "frequency_penalty", "unknown field"},
      {R"({"output_config": {"effort": "high"}})", "output_config", "unknown field"},
      {R"({"temperature": 1.5})", "temperature", "[0, 1]"},
      {R"({"top_p": 0})", "top_p", "greater than 0"},
      {R"({"top_k": -1})", "top_k", "top_k"},
      {R"({"stop_sequences": "END"})", "stop_sequences", "list of strings"},
      {R"({"stream": "yes"})", "stream", "true or false"},
      {R"({"metadata": "x"})", "metadata", "object"},
      {R"({"service_tier": "priority"})", "service_tier", "service_tier"},
      {R"({"model": 5})", "model", "string"},
      {R"({"system": [{"type": "image", "source": {}}]})", "system[0]", "image"},
      {R"({"system": 5})", "system", "string or a list"},
      {R"({"messages": []})", "messages", "non-empty"},
      {R"({"messages": [{"role": "system", "content": "x"}]})", "messages[0].role", "system"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "content"},
      {R"({"messages": [{"role": "user", "content": []}]})", "messages[0].content", "must not be empty"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "y"}]})",
       "messages[1].content", "must not be empty"},
      {R"({"messages": [{"role": "user", "content": "x", "name": "bob"}]})", "messages[0].name", "unknown field"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]})",
       "messages[0].content[0]", "image content is not supported yet"},
      {R"({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})", "messages[0].content[0]",
       "'document'"},
      {R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})", "messages[0].content[0].type", "type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]}]})",
       "messages[0].content[0].extra", "unknown field"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "citations": [{"type": "char_location"}]}]}]})",
       "messages[0].content[0].citations", "citations"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})",
       "messages[0].content[0]", "assistant"},
      {R"({"messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "t"}]}]})", "messages[0].content[0]",
       "assistant"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}, {"role": "user", "content": "y"}]})",
       "messages[1].content[0]", "user messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]})",
       "messages[0].content[0].tool_use_id", "tool_use_id"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": {}}]}]}]})",
       "messages[0].content[0].content[0]", "image"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}, {"role": "user", "content": "y"}]})",
       "messages[1].content[0].input", "input"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}, "caller": {"type": "code_execution_20250825"}}]}, {"role": "user", "content": "y"}]})",
       "messages[1].content[0].caller", "direct"},
      {R"({"tools": {"name": "f"}})", "tools", "list"},
      {R"({"tools": [{"name": "f"}]})", "tools[0].input_schema", "input_schema"},
      {R"({"tools": [{"input_schema": {}}]})", "tools[0].name", "name"},
      {R"({"tools": [{"type": "web_search_20250305", "name": "web_search"}]})", "tools[0].type", "server tools"},
      {R"({"tools": [{"name": "f", "input_schema": {}, "strict": true}]})", "tools[0].strict", "forced"},
      {R"({"tools": [{"name": "f", "input_schema": {}, "defer_loading": true}]})", "tools[0].defer_loading", "unknown field"},
  };
  for (const auto& c : cases) {
    const ApiError e = refusal(request(c.patch));
    EXPECT_EQ(e.param(), c.param) << c.patch << ": " << e.what();
    EXPECT_TRUE(contains(e.what(), c.says)) << c.patch << ": " << e.what();
  }
}

TEST(AnthropicApi, CountTokensTakesTheConversationOnly) {
  Json b = body(kToolHistory);
  b.erase("max_tokens");
  const MessageParams p = parse_count_tokens_request(b);
  EXPECT_EQ(p.chat.messages.size(), 5u);
  EXPECT_TRUE(p.chat.add_generation_prompt);
  EXPECT_EQ(refusal(request(), /*count_tokens=*/true).param(), "max_tokens");  // a generation field
  EXPECT_EQ(refusal(body(R"({"messages": []})"), true).param(), "messages");
}

TEST(AnthropicApi, ErrorsHaveAnthropicsShape) {
  const struct {
    int status;
    const char* type;
  } cases[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
               {404, "not_found_error"},       {413, "request_too_large"},     {429, "rate_limit_error"},
               {500, "api_error"},             {503, "overloaded_error"},      {529, "overloaded_error"}};
  for (const auto& c : cases) {
    const Json e = anthropic_error_body(c.status, "why");
    EXPECT_EQ(e, Json({{"type", "error"}, {"error", {{"type", c.type}, {"message", "why"}}}})) << c.status;
  }
  EXPECT_TRUE(is_anthropic_path("/v1/messages"));
  EXPECT_TRUE(is_anthropic_path("/v1/messages/count_tokens"));
  EXPECT_TRUE(is_anthropic_path("/v1/messages?beta=true"));
  EXPECT_FALSE(is_anthropic_path("/v1/chat/completions"));
  EXPECT_FALSE(is_anthropic_path("/v1/messagesx"));
}

// ---- replies ----

chat::OutputParserOptions plain() { return {}; }

Scripted run(const chat::OutputParserOptions& options, const std::vector<std::string>& pieces, const RequestEvent& finish,
             bool omit_thinking = false) {
  MessageReply streamed("msg_1", "m", options, omit_thinking, 10), whole("msg_1", "m", options, omit_thinking, 10);
  return script(streamed, whole, pieces, finish);
}

std::vector<std::string> types(const std::vector<Json>& events) {
  std::vector<std::string> out;
  for (const Json& e : events) {
    std::string t = e["type"];
    const Json* sub = t == "content_block_start" ? &e["content_block"] : t == "content_block_delta" ? &e["delta"] : nullptr;
    if (sub) t.append(1, ':').append((*sub)["type"].get_ref<const std::string&>());
    out.push_back(t);
  }
  return out;
}

// What the SDK's stream accumulator makes of the events (anthropic/lib/streaming/_messages.py).
Json accumulate(const std::vector<Json>& events) {
  Json message;
  std::vector<std::string> json_text;
  for (const Json& e : events) {
    const std::string type = e["type"];
    if (type == "message_start") {
      message = e["message"];
    } else if (type == "content_block_start") {
      EXPECT_EQ(e["index"], message["content"].size());
      message["content"].push_back(e["content_block"]);
      json_text.emplace_back();
    } else if (type == "content_block_delta") {
      const size_t i = e["index"];
      Json& block = message["content"][i];
      const Json& d = e["delta"];
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "thinking_delta")
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "input_json_delta") {
        json_text[i] += d["partial_json"].get<std::string>();
        block["input"] = Json::parse(json_text[i]);  // complete only at the end; checked then
      }
    } else if (type == "message_delta") {
      message["stop_reason"] = e["delta"]["stop_reason"];
      message["stop_sequence"] = e["delta"]["stop_sequence"];
      for (auto& [k, v] : e["usage"].items()) message["usage"][k] = v;
    }
  }
  return message;
}

// Anthropic's grammar: message_start, ping, then start/deltas/stop per block with
// indexes 0, 1, ... in order, message_delta, message_stop; each event once framed as SSE.
void expect_grammar(const std::vector<Json>& events) {
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "message_start");
  EXPECT_TRUE(events[0]["message"]["content"].empty());
  EXPECT_TRUE(events[0]["message"]["stop_reason"].is_null());
  EXPECT_EQ(events[0]["message"]["usage"]["input_tokens"], 10);
  EXPECT_EQ(events[1]["type"], "ping");
  EXPECT_EQ(events[events.size() - 2]["type"], "message_delta");
  EXPECT_EQ(events.back()["type"], "message_stop");
  int open = -1, next = 0;
  for (size_t i = 2; i + 2 < events.size(); ++i) {
    const Json& e = events[i];
    if (e["type"] == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block started inside another";
      EXPECT_EQ(e["index"], next);
      open = next++;
    } else if (e["type"] == "content_block_delta") {
      EXPECT_EQ(e["index"], open);
    } else if (e["type"] == "content_block_stop") {
      EXPECT_EQ(e["index"], open);
      open = -1;
    } else {
      ADD_FAILURE() << "unexpected event inside the message: " << e.dump();
    }
  }
  EXPECT_EQ(open, -1) << "a block was left open";
  const std::string sse = anthropic_sse(events[2]);
  EXPECT_EQ(sse, "event: " + events[2]["type"].get<std::string>() + "\ndata: " + events[2].dump() + "\n\n");
}

TEST(AnthropicReply, TextOnly) {
  const Scripted r = run(plain(), {"The capital", " is", " Paris."}, finish_event(FinishReason::Stop));
  expect_grammar(r.events);
  EXPECT_EQ(types(r.events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start:text", "content_block_delta:text_delta",
                                      "content_block_delta:text_delta", "content_block_delta:text_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(r.events[2]["content_block"], Json({{"type", "text"}, {"text", ""}}));
  const Json want = body(R"({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "The capital is Paris."}], "stop_reason": "end_turn", "stop_sequence": null,
    "usage": {"input_tokens": 6, "output_tokens": 7, "cache_read_input_tokens": 4}})");
  EXPECT_EQ(r.whole, want);
  EXPECT_EQ(accumulate(r.events), want);
  const Json& delta = r.events[r.events.size() - 2];
  EXPECT_EQ(delta["delta"], body(R"({"stop_reason": "end_turn", "stop_sequence": null})"));
  EXPECT_EQ(delta["usage"]["output_tokens"], 7);
}

TEST(AnthropicReply, ThinkingThenText) {
  chat::OutputParserOptions o;
  o.reasoning = chat::ReasoningFormat::kThinkTags;
  const Scripted r = run(o, {"<think>", "Paris is", " in France.", "</think>", "\n\nParis."}, finish_event(FinishReason::Stop));
  expect_grammar(r.events);
  EXPECT_EQ(types(r.events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start:thinking",
                                      "content_block_delta:thinking_delta", "content_block_delta:thinking_delta",
                                      "content_block_stop", "content_block_start:text", "content_block_delta:text_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const Json content = body(R"([{"type": "thinking", "thinking": "Paris is in France.", "signature": ""},
                                {"type": "text", "text": "Paris."}])");
  EXPECT_EQ(r.whole["content"], content);
  EXPECT_EQ(accumulate(r.events), r.whole);
  // display "omitted": the blocks stay, their text does not.
  const Scripted omitted = run(o, {"<think>", "secret", "</think>", "Paris."}, finish_event(FinishReason::Stop), true);
  expect_grammar(omitted.events);
  EXPECT_EQ(omitted.whole["content"][0], body(R"({"type": "thinking", "thinking": "", "signature": ""})"));
  EXPECT_EQ(accumulate(omitted.events), omitted.whole);
  for (const Json& e : omitted.events) EXPECT_EQ(e.dump().find("secret"), std::string::npos) << e.dump();
}

TEST(AnthropicReply, ToolCallEndsWithToolUse) {
  const std::vector<std::string> pieces = {"<think>", "The user wants", " weather.</think>\n\n", "<tool_call>\n{\"name\": ",
                                           "\"get_weather\", \"arguments\": {\"city\": ", "\"Paris\"}}\n</tool_call>"};
  const Scripted r = run(hermes_with_think(), pieces, finish_event(FinishReason::Stop));
  expect_grammar(r.events);
  EXPECT_EQ(r.whole["stop_reason"], "tool_use");
  EXPECT_TRUE(r.whole["stop_sequence"].is_null());
  ASSERT_EQ(r.whole["content"].size(), 2u);
  EXPECT_EQ(r.whole["content"][0]["type"], "thinking");
  const Json& call = r.whole["content"][1];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], body(R"({"city": "Paris"})"));
  EXPECT_EQ(call["id"].get<std::string>().rfind("toolu_", 0), 0u);
  std::string partial;
  for (const Json& e : r.events) {
    if (e["type"] == "content_block_start" && e["content_block"]["type"] == "tool_use") {
      EXPECT_EQ(e["content_block"]["input"], Json::object());  // the input comes as deltas
    }
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta") partial += e["delta"]["partial_json"];
  }
  EXPECT_EQ(partial, R"({"city":"Paris"})");
  Json streamed = accumulate(r.events);
  EXPECT_EQ(streamed["content"][1]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  streamed["content"][1]["id"] = call["id"];  // each reply draws its own ids
  EXPECT_EQ(streamed, r.whole);
}

TEST(AnthropicReply, ReasoningIsOpenUntilAnotherBlockBegins) {
  chat::OutputParserOptions o;
  o.reasoning = chat::ReasoningFormat::kThinkTags;
  MessageReply writes_the_tag("msg_1", "m", o, false, 10);
  EXPECT_FALSE(writes_the_tag.reasoning_open());
  writes_the_tag.add(text_event("<think>Hmm"));
  EXPECT_TRUE(writes_the_tag.reasoning_open());
  writes_the_tag.add(text_event(" well.</think>Paris"));
  EXPECT_FALSE(writes_the_tag.reasoning_open());
  o.starts_in_reasoning = true;  // the prompt opened <think>
  MessageReply opened("msg_2", "m", o, false, 10);
  EXPECT_TRUE(opened.reasoning_open());
  opened.add(text_event("Hmm"));
  EXPECT_TRUE(opened.reasoning_open());
  opened.add(finish_event(FinishReason::Length));
  EXPECT_FALSE(opened.reasoning_open());
  EXPECT_EQ(reasoning_close_marker(chat::ReasoningFormat::kThinkTags), "\n</think>\n\n");
  EXPECT_EQ(reasoning_close_marker(chat::ReasoningFormat::kNone), "");
}

TEST(AnthropicReply, MaxTokens) {
  const Scripted r = run(plain(), {"Once upon", " a time"}, finish_event(FinishReason::Length));
  expect_grammar(r.events);
  EXPECT_EQ(r.whole["stop_reason"], "max_tokens");
  EXPECT_TRUE(r.whole["stop_sequence"].is_null());
  EXPECT_EQ(r.events[r.events.size() - 2]["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(accumulate(r.events), r.whole);
}

TEST(AnthropicReply, StopSequence) {
  const Scripted r = run(plain(), {"one, two"}, finish_event(FinishReason::Stop, "", "three"));
  expect_grammar(r.events);
  EXPECT_EQ(r.whole["stop_reason"], "stop_sequence");
  EXPECT_EQ(r.whole["stop_sequence"], "three");
  EXPECT_EQ(r.events[r.events.size() - 2]["delta"], body(R"({"stop_reason": "stop_sequence", "stop_sequence": "three"})"));
  EXPECT_EQ(accumulate(r.events), r.whole);
}

TEST(AnthropicReply, EmptyReplyHasNoBlocks) {
  const Scripted r = run(plain(), {}, finish_event(FinishReason::Stop));
  EXPECT_EQ(types(r.events), (std::vector<std::string>{"message_start", "ping", "message_delta", "message_stop"}));
  EXPECT_TRUE(r.whole["content"].empty());
}

}  // namespace
}  // namespace corvid::server
