// The OpenAI response side: engine events turned into chat.completion /
// chat.completion.chunk and text_completion objects. The chat reply runs the
// model family's OutputParser over the text, so reasoning comes back as
// reasoning_content and tool calls as tool_calls (finish_reason "tool_calls").
//
// Not thread-safe: the server drives one reply from its connection's strand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corvid/chat/output_parser.h"
#include "corvid/engine/request.h"
#include "corvid/server/openai_api.h"
#include "corvid/server/reply_totals.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid::server {

struct ReplyMeta {
  std::string id;     // "chatcmpl-..." / "cmpl-..."
  std::string model;  // the served model name
  int64_t created = 0;
  int index = 0;      // the choice (n > 1)
  ReplyMeta with_index(int i) const {
    ReplyMeta m = *this;
    m.index = i;
    return m;
  }
};

// "stop", "length", ...; "tool_calls" when the reply made calls.
std::string finish_reason_word(FinishReason reason, bool made_tool_calls);
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

class ChatReply {
 public:
  // tokenizer: for the logprob entries' token text (may be null when logprobs are off).
  ChatReply(ReplyMeta meta, chat::OutputParserOptions options, const Tokenizer* tokenizer);

  // Streaming: the first chunk (the assistant role), then the chunks of each event;
  // the finishing event's chunks end with the one carrying finish_reason.
  Json role_chunk() const;
  std::vector<Json> chunks(const RequestEvent& event);
  // The final chunk with usage and no choices (stream_options.include_usage).
  Json usage_chunk() const;

  // Non-streaming: add() every event, then response().
  void add(const RequestEvent& event);
  Json response() const;

  bool finished() const { return totals_.finished; }

 private:
  // Feeds an event through the parser; returns the parser events it decided.
  std::vector<chat::OutputEvent> consume(const RequestEvent& event);
  Json logprob_entries(const RequestEvent& event) const;
  Json chunk(Json delta, const Json& logprobs, const Json& finish_reason) const;

  ReplyMeta meta_;
  chat::OutputParser parser_;
  const Tokenizer* tokenizer_;
  Json logprobs_ = Json::array();  // non-streaming: every token's entry
  bool want_logprobs_ = false;
  ReplyTotals totals_;
};

class CompletionReply {
 public:
  CompletionReply(ReplyMeta meta, const Tokenizer* tokenizer);

  std::vector<Json> chunks(const RequestEvent& event);  // streaming
  Json usage_chunk() const;
  void add(const RequestEvent& event);                   // non-streaming
  Json response() const;
  bool finished() const { return totals_.finished; }

 private:
  Json choice(const std::string& text, const Json& logprobs, const Json& finish_reason) const;
  void append_logprobs(const RequestEvent& event, Json& into, int64_t& offset) const;

  ReplyMeta meta_;
  const Tokenizer* tokenizer_;
  std::string text_;
  Json logprobs_;  // {"tokens", "token_logprobs", "top_logprobs", "text_offset"} when asked
  int64_t text_offset_ = 0;
  ReplyTotals totals_;
};

}  // namespace corvid::server
