// The OpenAI Responses side of a reply: engine events, read by the model family's
// OutputParser, turned into output items (reasoning, message, function_call) in the
// order the model wrote them, and into Responses' SSE events, each with its
// sequence_number. Streaming and non-streaming replies come from the same items, so a
// streamed response adds up to the whole one.
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
#include "corvid/server/responses_api.h"

namespace corvid::server {

// The response object before any output: the request's settings as OpenAI echoes them
// (instructions, tools, tool_choice, sampling, reasoning, metadata, store, ...), with
// status "in_progress", an empty output and no usage.
Json response_skeleton(const std::string& id, const std::string& model, int64_t created_at, const ResponseParams& params);

class ResponseReply {
 public:
  // skeleton: from response_skeleton; its "id" ("resp_…") names the output items too.
  ResponseReply(Json skeleton, chat::OutputParserOptions options);

  // Streaming: response.created and response.in_progress, then the events of each engine
  // event; the finishing one closes the open item and ends with response.completed (or
  // response.incomplete when max_output_tokens cut it).
  std::vector<Json> start();
  std::vector<Json> events(const RequestEvent& event);
  // A request that failed midway (cancelled, engine error): response.failed.
  std::vector<Json> failed(const std::string& message);

  // Non-streaming: add() every event, then response().
  void add(const RequestEvent& event);
  Json response() const;

  bool finished() const { return totals_.finished; }
  // Whether the model is still reasoning (what a reasoning budget counts): the prompt
  // opened reasoning or a reasoning item began, and no other item has yet.
  bool reasoning_open() const;

 private:
  bool reasoning_only() const;  // reasoning_open(), finished or not

  void apply(const chat::OutputEvent& e, std::vector<Json>& out);
  void open(Json item, std::vector<Json>& out);
  void close(std::vector<Json>& out);
  void consume(const RequestEvent& event, std::vector<Json>& out);
  Json event(const char* type, Json fields);  // numbered
  Json item_fields(Json fields) const;  // with the open item's item_id and output_index
  std::string item_id(const char* prefix) const;
  Json usage() const;

  Json skeleton_;
  std::string id_suffix_;     // of "resp_…", for the item ids
  bool starts_in_reasoning_;  // before parser_, which takes the options
  chat::OutputParser parser_;
  Json items_ = Json::array();
  bool item_open_ = false;
  std::string open_text_;  // the open item's text (or arguments) so far
  int64_t sequence_ = 0;
  int64_t completed_at_ = 0;
  ReplyTotals totals_;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace corvid::server
