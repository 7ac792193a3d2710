#include "corvid/server/anthropic_reply.h"

namespace corvid::server {

namespace {

// Anthropic's tool-use ids read "toolu_…"; the parser's are "call_…" (OpenAI's).
std::string tool_use_id(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}

}  // namespace

std::string reasoning_close_marker(chat::ReasoningFormat format) {
  switch (format) {
    case chat::ReasoningFormat::kThinkTags: return "\n</think>\n\n";
    case chat::ReasoningFormat::kGemma4: return "<channel|>";
    case chat::ReasoningFormat::kMistral: return "[/THINK]";
    case chat::ReasoningFormat::kHarmony: return "<|end|><|start|>assistant<|channel|>final<|message|>";
    case chat::ReasoningFormat::kNone: break;
  }
  return "";
}

std::string anthropic_sse(const Json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " +
         event.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

MessageReply::MessageReply(std::string id, std::string model, chat::OutputParserOptions options, bool omit_thinking,
                           int64_t prompt_tokens)
    : id_(std::move(id)),
      model_(std::move(model)),
      starts_in_reasoning_(options.starts_in_reasoning),
      parser_(std::move(options)),
      omit_thinking_(omit_thinking) {
  totals_.prompt_tokens = prompt_tokens;  // message_start's usage, before the request ends
}

bool MessageReply::reasoning_open() const {
  if (totals_.finished) return false;
  if (blocks_.empty()) return starts_in_reasoning_;
  return blocks_.size() == 1 && blocks_.back()["type"] == "thinking";
}

std::vector<Json> MessageReply::start() const {
  Json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", {{"input_tokens", totals_.prompt_tokens}, {"output_tokens", 0}}}};
  return {Json{{"type", "message_start"}, {"message", std::move(message)}}, Json{{"type", "ping"}}};
}

void MessageReply::open(Json block, std::vector<Json>& out) {
  close(out);
  out.push_back({{"type", "content_block_start"}, {"index", blocks_.size()}, {"content_block", block}});
  blocks_.push_back(std::move(block));
  block_open_ = true;
}

void MessageReply::close(std::vector<Json>& out) {
  if (!block_open_) return;
  block_open_ = false;
  Json& block = blocks_.back();
  if (block["type"] == "tool_use" && !tool_arguments_.empty()) {
    // The deltas add up to the parser's compact JSON object.
    Json input = Json::parse(tool_arguments_, nullptr, /*allow_exceptions=*/false);
    if (input.is_object()) block["input"] = std::move(input);
    tool_arguments_.clear();
  }
  out.push_back({{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
}

void MessageReply::apply(const chat::OutputEvent& e, std::vector<Json>& out) {
  using Kind = chat::OutputEvent::Kind;
  const auto open_type_is = [&](const char* type) { return block_open_ && blocks_.back()["type"] == type; };
  switch (e.kind) {
    case Kind::kContent: {
      if (e.text.empty()) return;
      if (!open_type_is("text")) open({{"type", "text"}, {"text", ""}}, out);
      blocks_.back()["text"] = blocks_.back()["text"].get<std::string>() + e.text;
      out.push_back({{"type", "content_block_delta"},
                     {"index", blocks_.size() - 1},
                     {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
      return;
    }
    case Kind::kReasoning: {
      if (e.text.empty()) return;
      if (!open_type_is("thinking")) open({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
      if (omit_thinking_) return;
      blocks_.back()["thinking"] = blocks_.back()["thinking"].get<std::string>() + e.text;
      out.push_back({{"type", "content_block_delta"},
                     {"index", blocks_.size() - 1},
                     {"delta", {{"type", "thinking_delta"}, {"thinking", e.text}}}});
      return;
    }
    case Kind::kToolCallStart:
      any_tool_use_ = true;
      open({{"type", "tool_use"}, {"id", tool_use_id(e.id)}, {"name", e.name}, {"input", Json::object()}}, out);
      return;
    case Kind::kToolCallArguments:
      if (!open_type_is("tool_use") || e.text.empty()) return;
      tool_arguments_ += e.text;
      out.push_back({{"type", "content_block_delta"},
                     {"index", blocks_.size() - 1},
                     {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
      return;
  }
}

void MessageReply::consume(const RequestEvent& event, std::vector<Json>& out) {
  for (const chat::OutputEvent& e : parser_.feed(event.text)) apply(e, out);
  if (!event.finish) return;
  for (const chat::OutputEvent& e : parser_.finish()) apply(e, out);
  close(out);
  totals_.note(event);
  stop_string_ = event.stop_string;
}

std::vector<Json> MessageReply::events(const RequestEvent& event) {
  std::vector<Json> out;
  consume(event, out);
  if (totals_.finished) {
    out.push_back({{"type", "message_delta"},
                   {"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()}}},
                   {"usage", usage()}});
    out.push_back({{"type", "message_stop"}});
  }
  return out;
}

void MessageReply::add(const RequestEvent& event) {
  std::vector<Json> ignored;
  consume(event, ignored);
}

std::string MessageReply::stop_reason() const {
  if (totals_.finish == FinishReason::Length) return "max_tokens";
  if (any_tool_use_) return "tool_use";
  return stop_string_.empty() ? "end_turn" : "stop_sequence";
}

Json MessageReply::stop_sequence() const {
  return stop_reason() == "stop_sequence" ? Json(stop_string_) : Json(nullptr);
}

// Anthropic counts cache reads apart from input_tokens: the two add up to the prompt.
Json MessageReply::usage() const {
  return Json{{"input_tokens", totals_.prompt_tokens - totals_.cached_tokens},
              {"output_tokens", totals_.completion_tokens},
              {"cache_read_input_tokens", totals_.cached_tokens}};
}

Json MessageReply::response() const {
  return Json{{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", blocks_},
              {"stop_reason", stop_reason()},
              {"stop_sequence", stop_sequence()},
              {"usage", usage()}};
}

}  // namespace corvid::server
