// Scripted engine events for the server's reply tests (OpenAI, Anthropic, Responses):
// what a request's events look like, a Qwen3-style parser setup, and one driver that
// feeds the same events to a streamed and a whole reply.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "corvid/chat/output_parser.h"
#include "corvid/engine/request.h"
#include "corvid/server/request_fields.h"

namespace corvid::server::testing {

inline RequestEvent text_event(std::string text, int32_t token = 1) {
  RequestEvent e;
  e.text = std::move(text);
  e.token_ids = {token};
  return e;
}

// The finishing event: 10 prompt tokens (4 cached) and 7 generated.
inline RequestEvent finish_event(FinishReason reason, std::string text = "", std::string stop_string = "") {
  RequestEvent e = text_event(std::move(text), 2);
  e.finish = reason;
  e.stop_string = std::move(stop_string);
  e.prompt_tokens = 10;
  e.completion_tokens = 7;
  e.cached_tokens = 4;
  return e;
}

// <think> reasoning and Hermes tool calls of one tool, get_weather.
inline chat::OutputParserOptions hermes_with_think() {
  chat::OutputParserOptions o;
  o.reasoning = chat::ReasoningFormat::kThinkTags;
  o.tools_format = chat::ToolFormat::kHermes;
  o.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  return o;
}

struct Scripted {
  std::vector<Json> events;  // streamed
  Json whole;                // the non-streaming reply of the same engine events
};

// Feeds `pieces` then `finish` to `streamed` (start(), events()) and `whole` (add(),
// response()), two fresh replies of one request (MessageReply or ResponseReply).
template <class Reply>
Scripted script(Reply& streamed, Reply& whole, const std::vector<std::string>& pieces, const RequestEvent& finish) {
  Scripted r;
  r.events = streamed.start();
  for (const std::string& piece : pieces) {
    for (Json& e : streamed.events(text_event(piece))) r.events.push_back(std::move(e));
    whole.add(text_event(piece));
  }
  for (Json& e : streamed.events(finish)) r.events.push_back(std::move(e));
  whole.add(finish);
  EXPECT_TRUE(streamed.finished() && whole.finished());
  r.whole = whole.response();
  return r;
}

}  // namespace corvid::server::testing
