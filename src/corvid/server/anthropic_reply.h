// The Anthropic Messages response side: engine events, read by the model family's
// OutputParser, turned into content blocks (thinking, text, tool_use) in the order the
// model wrote them. Streaming and non-streaming replies come from the same blocks, so
// the streamed message adds up to the whole one.
//
// Not thread-safe: the server drives one reply from its connection's strand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corvid/chat/output_parser.h"
#include "corvid/engine/request.h"
#include "corvid/server/reply_totals.h"
#include "corvid/server/request_fields.h"

namespace corvid::server {

class MessageReply {
 public:
  // prompt_tokens: the prompt's length, for message_start (the cached part is known
  // only when the request finishes). omit_thinking: thinking blocks without their text.
  MessageReply(std::string id, std::string model, chat::OutputParserOptions options, bool omit_thinking,
               int64_t prompt_tokens);

  // Streaming: message_start and a ping, then the events of each engine event; the
  // finishing one ends with the last content_block_stop, message_delta and message_stop.
  std::vector<Json> start() const;
  std::vector<Json> events(const RequestEvent& event);

  // Non-streaming: add() every event, then response().
  void add(const RequestEvent& event);
  Json response() const;

  bool finished() const { return totals_.finished; }
  // Whether the model is still reasoning (the thinking budget counts these tokens): the
  // prompt opened reasoning or a thinking block began, and no other block has yet.
  bool reasoning_open() const;

 private:
  void apply(const chat::OutputEvent& e, std::vector<Json>& out);
  void open(Json block, std::vector<Json>& out);
  void close(std::vector<Json>& out);
  void consume(const RequestEvent& event, std::vector<Json>& out);
  std::string stop_reason() const;
  Json stop_sequence() const;
  Json usage() const;

  std::string id_, model_;
  bool starts_in_reasoning_;  // before parser_, which takes the options
  chat::OutputParser parser_;
  bool omit_thinking_;
  Json blocks_ = Json::array();
  bool block_open_ = false;
  std::string tool_arguments_;  // of the open tool_use block, as JSON text
  bool any_tool_use_ = false;
  ReplyTotals totals_;
  std::string stop_string_;
};

// One event in Anthropic's SSE grammar: "event: TYPE\ndata: JSON\n\n".
std::string anthropic_sse(const Json& event);

// The text that ends reasoning in a format, as its templates write it ("" for kNone):
// what a thinking budget makes the model "write" once the budget is spent.
std::string reasoning_close_marker(chat::ReasoningFormat format);

}  // namespace corvid::server
