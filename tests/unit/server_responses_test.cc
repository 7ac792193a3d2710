// The OpenAI Responses mapping of the server, without a model: request bodies to items,
// the template's messages and the engine's parameters (every item kind, every refusal),
// and scripted engine events to output items and the SSE event sequence (the store:
// server_response_store_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "corvid/server/responses_api.h"
#include "corvid/server/responses_reply.h"
#include "server_reply_script.h"

namespace corvid::server {
namespace {

using testing::finish_event;
using testing::hermes_with_think;
using testing::Scripted;
using testing::script;
using testing::text_event;

Json body(const char* text) { return Json::parse(text); }

// A valid request with `extra` merged in (a null value removes the key).
Json request(const char* extra = "{}") {
  Json b = body(R"({"model": "m", "input": "hi"})");
  b.merge_patch(body(extra));
  return b;
}

// The 400 a body gets, or a failure when it is accepted.
ApiError refusal(const Json& b) {
  try {
    parse_response_request(b);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e;
  }
  ADD_FAILURE() << "accepted: " << b.dump();
  return ApiError(0, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ResponsesApi, RequestMapsEveryField) {
  const ResponseParams p = parse_response_request(body(R"({
    "model": "m", "input": "hi", "instructions": "be brief", "max_output_tokens": 99, "temperature": 0.25,
    "top_p": 0.5, "stream": true, "stream_options": {"include_obfuscation": false}, "store": false,
    "previous_response_id": "resp_1", "reasoning": {"effort": "low", "summary": "auto"}, "metadata": {"k": "v"},
    "user": "u", "safety_identifier": "s", "prompt_cache_key": "c", "text": {"format": {"type": "text"}},
    "include": [], "truncation": "disabled", "service_tier": "auto", "background": false, "parallel_tool_calls": true,
    "tools": [{"type": "function", "name": "get_weather", "description": "The weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": false}],
    "tool_choice": "auto"})"));
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.max_output_tokens, 99);
  EXPECT_FLOAT_EQ(p.generation.sampling.temperature, 0.25f);
  EXPECT_FLOAT_EQ(p.generation.sampling.top_p, 0.5f);
  EXPECT_EQ(p.temperature, 0.25);
  EXPECT_EQ(p.top_p, 0.5);
  EXPECT_TRUE(p.stream);
  EXPECT_FALSE(p.store);
  EXPECT_EQ(p.previous_response_id, "resp_1");
  EXPECT_EQ(p.instructions, "be brief");
  EXPECT_EQ(p.effort, "low");
  EXPECT_EQ(p.summary, "auto");
  EXPECT_EQ(p.metadata, body(R"({"k": "v"})"));
  EXPECT_EQ(p.user, "u");
  EXPECT_EQ(p.safety_identifier, "s");
  EXPECT_EQ(p.prompt_cache_key, "c");
  EXPECT_EQ(p.input, body(R"([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])"));
  EXPECT_EQ(p.tools.size(), 1u);  // echoed as given
  EXPECT_EQ(p.chat_tools, body(R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather",
                                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  EXPECT_TRUE(p.parse_tools);
  EXPECT_EQ(p.tool_choice, "auto");
}

TEST(ResponsesApi, Defaults) {
  const ResponseParams p = parse_response_request(request());
  EXPECT_FLOAT_EQ(p.generation.sampling.temperature, 1.0f);
  EXPECT_FALSE(p.max_output_tokens.has_value());
  EXPECT_TRUE(p.store);  // OpenAI's default
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.effort.has_value());
  EXPECT_FALSE(p.parse_tools);
  EXPECT_TRUE(p.chat_tools.is_null());
  EXPECT_TRUE(p.metadata.is_object() && p.metadata.empty());
}

constexpr const char* kHistory = R"([
  {"role": "developer", "content": "be brief"},
  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in"}, {"type": "input_text", "text": "Paris?"}]},
  {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "A summary."}],
   "content": [{"type": "reasoning_text", "text": "They want weather."}], "encrypted_content": "opaque"},
  {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
   "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}]},
  {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
  {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "not json"},
  {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
  {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "no"}, {"type": "input_text", "text": "data"}]},
  {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Only a summary."}]},
  {"role": "assistant", "content": "It is sunny."},
  {"role": "system", "content": "one more rule"},
  {"role": "user", "content": "Thanks."}])";

TEST(ResponsesApi, EveryItemKindBecomesTheTemplatesMessages) {
  const Json items = normalize_input(body(kHistory));
  ASSERT_EQ(items.size(), 12u);
  EXPECT_EQ(items[0], body(R"({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]})"));
  EXPECT_EQ(items[2], body(R"({"type": "reasoning", "summary": [{"type": "summary_text", "text": "A summary."}],
                               "content": [{"type": "reasoning_text", "text": "They want weather."}], "id": "rs_1"})"));
  EXPECT_EQ(items[7]["output"], "no\ndata");
  EXPECT_EQ(items[9]["content"], body(R"([{"type": "output_text", "text": "It is sunny."}])"));
  const Json want = body(R"([
    {"role": "system", "content": "instructions"},
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "Weather in\nParis?"},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "They want weather.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
      {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "name": "get_weather"},
    {"role": "tool", "tool_call_id": "call_2", "content": "no\ndata", "name": "get_weather"},
    {"role": "assistant", "content": "It is sunny.", "reasoning_content": "Only a summary."},
    {"role": "system", "content": "one more rule"},
    {"role": "user", "content": "Thanks."}])");
  EXPECT_EQ(items_to_messages(items, std::string("instructions")), want);
}

TEST(ResponsesApi, CallsWithoutTextAndTrailingReasoning) {
  // A function_call right after the user: an assistant message of its own with empty
  // text; a reasoning item with nothing after it still reaches the template.
  const Json items = normalize_input(body(R"([
    {"role": "user", "content": "go"},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "done"},
    {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "more"}]}])"));
  const Json want = body(R"([
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "", "reasoning_content": "think",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "done", "name": "f"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    {"role": "assistant", "content": "", "reasoning_content": "more"}])");
  EXPECT_EQ(items_to_messages(items, std::nullopt), want);
}

TEST(ResponsesApi, EveryRefusalNamesItsField) {
  struct Case {
    const char* patch;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"frobnicate": 1})", "frobnicate", "unknown field"},
      {R"({"input": null})", "input", "required"},
      {R"({"input": []})", "input", "non-empty"},
      {R"({"input": 3})", "input", "string or a non-empty list"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]})", "input[0].content[0]", "text-only"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})", "input[0].content[0]", "text-only"},
      {R"({"input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]})", "input[0].content[0]", "assistant"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role", "unknown role"},
      {R"({"input": [{"role": "user", "content": "x", "name": "bob"}]})", "input[0].name", "unknown field"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})", "input[0].arguments", "arguments"},
      {R"({"input": [{"type": "function_call_output", "output": "x"}]})", "input[0].call_id", "call_id"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]}]})", "input[0].output[0]", "text-only"},
      {R"({"input": [{"type": "reasoning", "content": []}]})", "input[0].summary", "summary"},
      {R"({"input": [{"type": "reasoning", "summary": [{"type": "reasoning_text", "text": "x"}]}]})", "input[0].summary[0].type", "summary_text"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type", "not supported"},
      {R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input[0].type", "not supported"},
      {R"({"instructions": ["x"]})", "instructions", "string"},
      {R"({"tools": [{"type": "web_search"}]})", "tools[0].type", "only function tools"},
      {R"({"tools": [{"type": "function", "name": "f", "strict": true}]})", "tools[0].strict", "forced"},
      {R"({"tools": [{"type": "function"}]})", "tools[0].name", "name"},
      {R"({"tools": [{"type": "function", "name": "f", "function": {}}]})", "tools[0].function", "unknown field"},
      {R"({"tool_choice": "required"})", "tool_choice", "no 'tools'"},
      {R"({"tool_choice": {"type": "function", "name": "f"}})", "tool_choice", "no 'tools'"},
      {R"({"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})", "tool_choice", "not in 'tools'"},
      {R"({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}})", "tool_choice", "not supported"},
      {R"({"tool_choice": "sometimes"})", "tool_choice", "auto, none or required"},
      {R"({"tools": [{"type": "function", "name": "f"}], "parallel_tool_calls": false})", "parallel_tool_calls", "required"},
      {R"({"text": {"format": {"type": "json_schema", "schema": {}}}})", "text.format.name", "required"},
      {R"({"text": {"format": {"type": "json_schema", "name": "x", "schema": {}, "indent": 2}}})", "text.format.indent", "unknown field"},
      {R"({"text": {"format": {"type": "yaml"}}})", "text.format.type", "text, json_object or json_schema"},
      {R"({"text": {"verbosity": "low"}})", "text.verbosity", "unknown field"},
      {R"({"reasoning": {"effort": "extreme"}})", "reasoning.effort", "minimal"},
      {R"({"reasoning": {"summary": "detailed"}})", "reasoning.summary", "summaries"},
      {R"({"reasoning": {"effort": "low", "budget": 3}})", "reasoning.budget", "unknown field"},
      {R"({"max_output_tokens": 0})", "max_output_tokens", "must be in"},
      {R"({"temperature": 2.5})", "temperature", "must be in"},
      {R"({"top_p": 0})", "top_p", "greater than 0"},
      {R"({"metadata": {"k": 1}})", "metadata", "strings"},
      {R"({"store": "yes"})", "store", "true or false"},
      {R"({"include": ["reasoning.encrypted_content"]})", "include", "not supported"},
      {R"({"truncation": "auto"})", "truncation", "not supported"},
      {R"({"background": true})", "background", "not supported"},
      {R"({"service_tier": "flex"})", "service_tier", "auto or default"},
      {R"({"stream_options": {"include_usage": true}})", "stream_options.include_usage", "unknown field"},
      {R"({"conversation": "conv_1"})", "conversation", "unknown field"},
      {R"({"top_k": 3})", "top_k", "unknown field"},
  };
  for (const Case& c : cases) {
    const ApiError e = refusal(request(c.patch));
    EXPECT_EQ(e.param(), c.param) << c.patch << ": " << e.what();
    EXPECT_TRUE(contains(e.what(), c.says)) << c.patch << ": " << e.what();
  }
}

TEST(ResponsesApi, ToolChoiceNoneKeepsTheToolsAndParsesNoCall) {
  const char* tools = R"({"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": null}]})";
  Json b = request(tools);
  EXPECT_TRUE(parse_response_request(b).parse_tools);
  b["tool_choice"] = "none";
  const ResponseParams none = parse_response_request(b);
  EXPECT_FALSE(none.parse_tools);
  EXPECT_FALSE(none.chat_tools.is_null());  // the template still shows them
  EXPECT_EQ(none.tool_choice, "none");
  EXPECT_FALSE(parse_response_request(request(R"({"tool_choice": "auto"})")).parse_tools);  // no tools: nothing to parse
}

TEST(ResponsesApi, StructuredOutputAndForcedCalls) {
  ResponseParams p = parse_response_request(request(R"({"text": {"format": {"type": "json_schema", "name": "city",
      "strict": true, "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}})"));
  ASSERT_TRUE(p.format);
  EXPECT_EQ(p.format->kind, OutputFormat::Kind::JsonSchema);
  EXPECT_EQ(Json::parse(p.format->spec)["properties"]["name"]["type"], "string");
  EXPECT_EQ(p.text["format"]["name"], "city");  // echoed as given
  p = parse_response_request(request(R"({"text": {"format": {"type": "json_object"}}})"));
  ASSERT_TRUE(p.format);
  EXPECT_TRUE(p.format->object_only);
  const char* tools = R"({"tools": [{"type": "function", "name": "f", "strict": true,
                                     "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}],
                          "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})";
  p = parse_response_request(request(tools));
  ASSERT_TRUE(p.forcing);
  EXPECT_EQ(p.forcing->name, "f");
  EXPECT_EQ(Json::parse(p.format->spec)["properties"]["x"]["type"], "integer");
  EXPECT_EQ(p.tool_choice, body(R"({"type": "function", "name": "f"})"));
  EXPECT_FALSE(p.parallel_tool_calls);
  p = parse_response_request(request(R"({"tools": [{"type": "function", "name": "f"}], "tool_choice": "required"})"));
  ASSERT_TRUE(p.forcing);
  EXPECT_EQ(p.forcing->mode, ToolForcing::Mode::Required);
}

TEST(ResponsesApi, EffortSetsTheThinkingSwitchAndBudget) {
  struct Case {
    const char* effort;
    bool reads_effort;
    const char* kwargs;
    std::optional<int64_t> budget;
  };
  const Case cases[] = {
      {"none", false, R"({"enable_thinking": false})", std::nullopt},
      {"minimal", false, R"({"enable_thinking": true})", 256},
      {"low", false, R"({"enable_thinking": true})", 1024},
      {"medium", false, R"({"enable_thinking": true})", 4096},
      {"high", false, R"({"enable_thinking": true})", std::nullopt},
      {"xhigh", false, R"({"enable_thinking": true})", std::nullopt},
      {"minimal", true, R"({"reasoning_effort": "low"})", std::nullopt},
      {"medium", true, R"({"reasoning_effort": "medium"})", std::nullopt},
      {"max", true, R"({"reasoning_effort": "high"})", std::nullopt},
      {"none", true, R"({"enable_thinking": false})", std::nullopt},
  };
  for (const Case& c : cases) {
    ChatRequest chat;
    EXPECT_EQ(apply_effort(std::string(c.effort), c.reads_effort, chat), c.budget) << c.effort;
    EXPECT_EQ(Json(chat.kwargs), body(c.kwargs)) << c.effort;
  }
  ChatRequest untouched;
  EXPECT_FALSE(apply_effort(std::nullopt, false, untouched).has_value());
  EXPECT_TRUE(untouched.kwargs.empty());  // no effort: the template's default
}

TEST(ResponsesApi, EffortTheTemplateCannotHonourIsRefused) {
  const auto check = [](bool thinking, bool budget, bool has_switch, bool reasons) -> std::string {
    ChatRequest chat;
    chat.kwargs["enable_thinking"] = thinking;
    try {
      check_effort(chat, budget, has_switch, reasons);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), "reasoning.effort");
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(check(true, false, false, false), "cannot be turned on"));
  EXPECT_TRUE(contains(check(false, false, false, true), "cannot turn reasoning off"));
  EXPECT_TRUE(contains(check(true, true, true, false), "budget"));
  EXPECT_EQ(check(true, true, true, true), "");
  EXPECT_EQ(check(false, false, true, true), "");
  EXPECT_EQ(check(false, false, false, false), "");  // off on a template that never reasons: nothing to do
}

// ---- replies ----

chat::OutputParserOptions think_tags(bool with_tools = false) {
  chat::OutputParserOptions o;
  o.reasoning = chat::ReasoningFormat::kThinkTags;
  if (with_tools) {
    o.tools_format = chat::ToolFormat::kHermes;
    o.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  }
  return o;
}

Json skeleton() {
  ResponseParams p = parse_response_request(request(R"({"instructions": "be brief", "metadata": {"k": "v"}})"));
  return response_skeleton("resp_1", "m", 1000, p);
}

Scripted run(const chat::OutputParserOptions& options, const std::vector<std::string>& pieces, const RequestEvent& finish) {
  ResponseReply streamed(skeleton(), options), whole(skeleton(), options);
  return script(streamed, whole, pieces, finish);
}

std::vector<std::string> types(const std::vector<Json>& events) {
  std::vector<std::string> out;
  for (const Json& e : events) out.push_back(e["type"]);
  return out;
}

// What the SDK's stream accumulator makes of the events
// (openai/lib/streaming/responses/_responses.py): items from output_item.added, parts
// from content_part.added, text and arguments from the deltas, each item's status from
// its output_item.done; the final response is response.completed's (or .incomplete's).
// Also checks the grammar: sequence numbers 0, 1, ...; created and in_progress first;
// every event of an item between its added and done; one item open at a time.
Json accumulate(const std::vector<Json>& events, Json* final_response) {
  Json output = Json::array();
  int open = -1;
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    const std::string type = e["type"];
    EXPECT_EQ(e["sequence_number"], i) << type;
    if (i == 0) {
      EXPECT_EQ(type, "response.created");
    }
    if (i == 1) {
      EXPECT_EQ(type, "response.in_progress");
    }
    if (i < 2) {
      EXPECT_EQ(e["response"]["status"], "in_progress");
      EXPECT_TRUE(e["response"]["output"].empty());
      continue;
    }
    if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
      EXPECT_EQ(i + 1, events.size()) << "the last event";
      EXPECT_EQ(open, -1) << "an item was left open";
      *final_response = e["response"];
      continue;
    }
    if (type == "response.output_item.added") {
      EXPECT_EQ(open, -1) << "an item started inside another";
      EXPECT_EQ(e["output_index"], output.size());
      open = static_cast<int>(output.size());
      output.push_back(e["item"]);
      EXPECT_EQ(e["item"]["status"], "in_progress");
      continue;
    }
    EXPECT_EQ(e["output_index"], open) << type;
    Json& item = output[static_cast<size_t>(open)];
    if (type == "response.output_item.done") {
      EXPECT_EQ(e["item"]["id"], item["id"]);
      item["status"] = e["item"]["status"];
      open = -1;
      continue;
    }
    EXPECT_EQ(e["item_id"], item["id"]) << type;
    if (type == "response.content_part.added") {
      item["content"].push_back(e["part"]);
    } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
      EXPECT_EQ(e["content_index"], 0);
      Json& part = item["content"][0];
      part["text"] = part["text"].get<std::string>() + e["delta"].get<std::string>();
      if (type == "response.output_text.delta") {
        EXPECT_EQ(e["logprobs"], Json::array());
      }
    } else if (type == "response.function_call_arguments.delta") {
      item["arguments"] = item["arguments"].get<std::string>() + e["delta"].get<std::string>();
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      EXPECT_EQ(e["text"], item["content"][0]["text"]);
    } else if (type == "response.content_part.done") {
      EXPECT_EQ(e["part"]["text"], item["content"][0]["text"]);
      if (e["part"]["type"] == "output_text") item["content"][0]["logprobs"] = e["part"]["logprobs"];
    } else if (type == "response.function_call_arguments.done") {
      EXPECT_EQ(e["arguments"], item["arguments"]);
      EXPECT_EQ(e["name"], item["name"]);
    } else {
      ADD_FAILURE() << "unexpected event: " << e.dump();
    }
  }
  return output;
}

// The streamed items equal the whole reply's (the call ids apart: each reply draws its own).
void expect_same_items(Json streamed, const Json& whole) {
  ASSERT_EQ(streamed.size(), whole["output"].size());
  for (size_t i = 0; i < streamed.size(); ++i)
    if (streamed[i]["type"] == "function_call") streamed[i]["call_id"] = whole["output"][i]["call_id"];
  EXPECT_EQ(streamed, whole["output"]);
}

TEST(ResponsesReply, TextOnly) {
  const Scripted r = run({}, {"The capital", " is", " Paris."}, finish_event(FinishReason::Stop));
  EXPECT_EQ(types(r.events), (std::vector<std::string>{
                                 "response.created", "response.in_progress", "response.output_item.added",
                                 "response.content_part.added", "response.output_text.delta",
                                 "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                                 "response.content_part.done", "response.output_item.done", "response.completed"}));
  Json final_response;
  expect_same_items(accumulate(r.events, &final_response), r.whole);
  const Json want_output = body(R"([{"id": "msg_1_0", "type": "message", "status": "completed", "role": "assistant",
    "content": [{"type": "output_text", "annotations": [], "text": "The capital is Paris.", "logprobs": []}]}])");
  EXPECT_EQ(r.whole["output"], want_output);
  EXPECT_EQ(r.whole["status"], "completed");
  EXPECT_GE(r.whole["completed_at"].get<int64_t>(), 1000);
  EXPECT_TRUE(r.whole["incomplete_details"].is_null());
  EXPECT_TRUE(r.whole["error"].is_null());
  EXPECT_EQ(r.whole["usage"], body(R"({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17})"));
  // The request's settings, as OpenAI echoes them.
  EXPECT_EQ(r.whole["id"], "resp_1");
  EXPECT_EQ(r.whole["object"], "response");
  EXPECT_EQ(r.whole["created_at"], 1000);
  EXPECT_EQ(r.whole["instructions"], "be brief");
  EXPECT_EQ(r.whole["metadata"], body(R"({"k": "v"})"));
  EXPECT_EQ(r.whole["tools"], Json::array());
  EXPECT_EQ(r.whole["tool_choice"], "auto");
  EXPECT_EQ(r.whole["parallel_tool_calls"], true);
  EXPECT_EQ(r.whole["store"], true);
  EXPECT_EQ(final_response, r.whole);
}

TEST(ResponsesReply, ReasoningThenText) {
  const Scripted r = run(think_tags(), {"<think>", "Paris is", " in France.", "</think>", "\n\nParis."},
                         finish_event(FinishReason::Stop));
  EXPECT_EQ(types(r.events), (std::vector<std::string>{
                                 "response.created", "response.in_progress", "response.output_item.added",
                                 "response.content_part.added", "response.reasoning_text.delta",
                                 "response.reasoning_text.delta", "response.reasoning_text.done",
                                 "response.content_part.done", "response.output_item.done",
                                 "response.output_item.added", "response.content_part.added",
                                 "response.output_text.delta", "response.output_text.done",
                                 "response.content_part.done", "response.output_item.done", "response.completed"}));
  Json final_response;
  expect_same_items(accumulate(r.events, &final_response), r.whole);
  ASSERT_EQ(r.whole["output"].size(), 2u);
  EXPECT_EQ(r.whole["output"][0], body(R"({"id": "rs_1_0", "type": "reasoning", "status": "completed", "summary": [],
    "content": [{"type": "reasoning_text", "text": "Paris is in France."}]})"));
  EXPECT_EQ(r.whole["output"][1]["id"], "msg_1_1");
  EXPECT_EQ(r.whole["output"][1]["content"][0]["text"], "Paris.");
  // Reasoning tokens: the events read while only reasoning had come ("Paris is", " in France.",
  // "</think>"; one token each here), not the bare opening tag nor the answer.
  EXPECT_EQ(r.whole["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
}

TEST(ResponsesReply, FunctionCall) {
  const std::vector<std::string> pieces = {"<think>", "The user wants", " weather.</think>\n\n", "<tool_call>\n{\"name\": ",
                                           "\"get_weather\", \"arguments\": {\"city\": ", "\"Paris\"}}\n</tool_call>"};
  const Scripted r = run(think_tags(/*with_tools=*/true), pieces, finish_event(FinishReason::Stop));
  Json final_response;
  expect_same_items(accumulate(r.events, &final_response), r.whole);
  EXPECT_EQ(r.whole["status"], "completed");
  ASSERT_EQ(r.whole["output"].size(), 2u);
  const Json& call = r.whole["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["id"], "fc_1_1");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  size_t deltas = 0;
  for (const Json& e : r.events) {
    if (e["type"] == "response.output_item.added" && e["item"]["type"] == "function_call") {
      EXPECT_EQ(e["item"]["arguments"], "");  // the arguments come as deltas
    }
    deltas += e["type"] == "response.function_call_arguments.delta";
  }
  EXPECT_GE(deltas, 1u);
  // A stored call reads back as the template's tool call.
  const Json messages = items_to_messages(r.whole["output"], std::nullopt);
  EXPECT_EQ(messages[0]["reasoning_content"], "The user wants weather.");
  EXPECT_EQ(messages[0]["tool_calls"][0]["function"]["arguments"], body(R"({"city": "Paris"})"));
}

TEST(ResponsesReply, MaxOutputTokensIsIncomplete) {
  const Scripted r = run({}, {"Once upon", " a time"}, finish_event(FinishReason::Length));
  EXPECT_EQ(types(r.events).back(), "response.incomplete");
  Json final_response;
  expect_same_items(accumulate(r.events, &final_response), r.whole);
  EXPECT_EQ(final_response, r.whole);
  EXPECT_EQ(r.whole["status"], "incomplete");
  EXPECT_EQ(r.whole["incomplete_details"], body(R"({"reason": "max_output_tokens"})"));
  EXPECT_TRUE(r.whole["completed_at"].is_null());
  EXPECT_EQ(r.whole["output"][0]["status"], "incomplete");
  // Cut while reasoning: the reasoning item is the incomplete one, every token reasoning.
  const Scripted thinking = run(think_tags(), {"<think>", "Hmm", " still"}, finish_event(FinishReason::Length));
  ASSERT_EQ(thinking.whole["output"].size(), 1u);
  EXPECT_EQ(thinking.whole["output"][0]["type"], "reasoning");
  EXPECT_EQ(thinking.whole["output"][0]["status"], "incomplete");
  EXPECT_EQ(thinking.whole["usage"]["output_tokens_details"]["reasoning_tokens"], 3);  // all but the bare "<think>"
}

TEST(ResponsesReply, ReasoningIsOpenUntilAnotherItemBegins) {
  chat::OutputParserOptions opened = think_tags();
  opened.starts_in_reasoning = true;  // the prompt opened <think>
  ResponseReply reply(skeleton(), opened);
  EXPECT_TRUE(reply.reasoning_open());
  reply.add(text_event("Hmm"));
  EXPECT_TRUE(reply.reasoning_open());
  reply.add(text_event("</think>\n\nAnswer"));
  EXPECT_FALSE(reply.reasoning_open());
  ResponseReply plain(skeleton(), {});
  EXPECT_FALSE(plain.reasoning_open());
}

TEST(ResponsesReply, FailedMidway) {
  ResponseReply reply(skeleton(), {});
  std::vector<Json> events = reply.start();
  for (Json& e : reply.events(text_event("Hello"))) events.push_back(std::move(e));
  for (Json& e : reply.failed("the server is shutting down")) events.push_back(std::move(e));
  const Json& last = events.back();
  EXPECT_EQ(last["type"], "response.failed");
  EXPECT_EQ(last["sequence_number"], events.size() - 1);
  EXPECT_EQ(last["response"]["status"], "failed");
  EXPECT_EQ(last["response"]["error"], body(R"({"code": "server_error", "message": "the server is shutting down"})"));
  EXPECT_TRUE(last["response"]["output"].empty());  // the open message is left out
}

}  // namespace
}  // namespace corvid::server
