#include "corvid/server/openai_reply.h"

namespace corvid::server {

namespace {

std::string token_text(const Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer) return std::to_string(id);
  const int32_t ids[1] = {id};
  return tokenizer->decode(ids, /*skip_special_tokens=*/false);
}

Json token_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json tool_call_json(const chat::ToolCall& call) {
  return Json{{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

std::string finish_reason_word(FinishReason reason, bool made_tool_calls) {
  if (reason == FinishReason::Stop && made_tool_calls) return "tool_calls";
  return finish_reason_name(reason);
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

// ---- chat ----

ChatReply::ChatReply(ReplyMeta meta, chat::OutputParserOptions options, const Tokenizer* tokenizer)
    : meta_(std::move(meta)), parser_(std::move(options)), tokenizer_(tokenizer) {}

std::vector<chat::OutputEvent> ChatReply::consume(const RequestEvent& event) {
  if (!event.logprobs.empty()) want_logprobs_ = true;
  std::vector<chat::OutputEvent> events = parser_.feed(event.text);
  if (totals_.note(event))
    for (chat::OutputEvent& e : parser_.finish()) events.push_back(std::move(e));
  return events;
}

Json ChatReply::logprob_entries(const RequestEvent& event) const {
  Json entries = Json::array();
  for (size_t i = 0; i < event.logprobs.size() && i < event.token_ids.size(); ++i) {
    const std::string text = token_text(tokenizer_, event.token_ids[i]);
    Json top = Json::array();
    if (i < event.top_logprobs.size()) {
      for (const TokenLogprob& alt : event.top_logprobs[i]) {
        const std::string alt_text = token_text(tokenizer_, alt.token);
        top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", token_bytes(alt_text)}});
      }
    }
    entries.push_back({{"token", text}, {"logprob", event.logprobs[i]}, {"bytes", token_bytes(text)}, {"top_logprobs", top}});
  }
  return entries;
}

Json ChatReply::chunk(Json delta, const Json& logprobs, const Json& finish_reason) const {
  Json choice = {{"index", meta_.index}, {"delta", std::move(delta)}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  return Json{{"id", meta_.id},           {"object", "chat.completion.chunk"}, {"created", meta_.created},
              {"model", meta_.model},     {"system_fingerprint", nullptr},     {"choices", Json::array({choice})}};
}

Json ChatReply::role_chunk() const { return chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr); }

std::vector<Json> ChatReply::chunks(const RequestEvent& event) {
  const std::vector<chat::OutputEvent> events = consume(event);
  Json logprobs = want_logprobs_ ? Json{{"content", logprob_entries(event)}} : Json(nullptr);
  std::vector<Json> out;
  for (const chat::OutputEvent& e : events) {
    Json delta;
    switch (e.kind) {
      case chat::OutputEvent::Kind::kContent: delta = {{"content", e.text}}; break;
      case chat::OutputEvent::Kind::kReasoning: delta = {{"reasoning_content", e.text}}; break;
      case chat::OutputEvent::Kind::kToolCallStart:
        delta = {{"tool_calls", Json::array({{{"index", e.tool_index},
                                              {"id", e.id},
                                              {"type", "function"},
                                              {"function", {{"name", e.name}, {"arguments", ""}}}}})}};
        break;
      case chat::OutputEvent::Kind::kToolCallArguments:
        delta = {{"tool_calls", Json::array({{{"index", e.tool_index}, {"function", {{"arguments", e.text}}}}})}};
        break;
    }
    out.push_back(chunk(std::move(delta), out.empty() ? logprobs : Json(nullptr), nullptr));
  }
  // Logprobs of tokens whose text is still held back ride on an empty delta.
  if (out.empty() && want_logprobs_ && !event.token_ids.empty()) out.push_back(chunk({{"content", ""}}, logprobs, nullptr));
  if (totals_.finished) {
    const bool calls = !parser_.result().tool_calls.empty();
    out.push_back(chunk(Json::object(), nullptr, finish_reason_word(totals_.finish, calls)));
  }
  return out;
}

Json ChatReply::usage_chunk() const {
  return Json{{"id", meta_.id},        {"object", "chat.completion.chunk"}, {"created", meta_.created},
              {"model", meta_.model},  {"system_fingerprint", nullptr},     {"choices", Json::array()},
              {"usage", usage_json(totals_.prompt_tokens, totals_.completion_tokens, totals_.cached_tokens)}};
}

void ChatReply::add(const RequestEvent& event) {
  consume(event);
  if (want_logprobs_)
    for (Json& entry : logprob_entries(event)) logprobs_.push_back(std::move(entry));
}

Json ChatReply::response() const {
  const chat::ParsedOutput out = parser_.result();
  Json message = {{"role", "assistant"}, {"content", out.content}};
  if (out.content.empty() && !out.tool_calls.empty()) message["content"] = nullptr;
  if (!out.reasoning_content.empty()) message["reasoning_content"] = out.reasoning_content;
  if (!out.tool_calls.empty()) {
    Json calls = Json::array();
    for (const chat::ToolCall& call : out.tool_calls) calls.push_back(tool_call_json(call));
    message["tool_calls"] = std::move(calls);
  }
  Json choice = {{"index", meta_.index},
                 {"message", std::move(message)},
                 {"logprobs", want_logprobs_ ? Json{{"content", logprobs_}} : Json(nullptr)},
                 {"finish_reason", finish_reason_word(totals_.finish, !out.tool_calls.empty())}};
  return Json{{"id", meta_.id},       {"object", "chat.completion"},      {"created", meta_.created},
              {"model", meta_.model}, {"system_fingerprint", nullptr},    {"choices", Json::array({choice})},
              {"usage", usage_json(totals_.prompt_tokens, totals_.completion_tokens, totals_.cached_tokens)}};
}

// ---- completions ----

CompletionReply::CompletionReply(ReplyMeta meta, const Tokenizer* tokenizer)
    : meta_(std::move(meta)), tokenizer_(tokenizer) {}

void CompletionReply::append_logprobs(const RequestEvent& event, Json& into, int64_t& offset) const {
  if (event.logprobs.empty()) return;
  if (into.is_null())
    into = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
  for (size_t i = 0; i < event.logprobs.size() && i < event.token_ids.size(); ++i) {
    const std::string text = token_text(tokenizer_, event.token_ids[i]);
    into["tokens"].push_back(text);
    into["token_logprobs"].push_back(event.logprobs[i]);
    Json top = Json::object();
    if (i < event.top_logprobs.size())
      for (const TokenLogprob& alt : event.top_logprobs[i]) top[token_text(tokenizer_, alt.token)] = alt.logprob;
    into["top_logprobs"].push_back(std::move(top));
    into["text_offset"].push_back(offset);
    offset += static_cast<int64_t>(text.size());
  }
}

Json CompletionReply::choice(const std::string& text, const Json& logprobs, const Json& finish_reason) const {
  return Json{{"index", meta_.index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

std::vector<Json> CompletionReply::chunks(const RequestEvent& event) {
  totals_.note(event);
  Json logprobs;
  append_logprobs(event, logprobs, text_offset_);
  if (event.text.empty() && logprobs.is_null() && !totals_.finished) return {};
  const Json finish = totals_.finished ? Json(finish_reason_word(totals_.finish, false)) : Json(nullptr);
  return {Json{{"id", meta_.id},
               {"object", "text_completion"},
               {"created", meta_.created},
               {"model", meta_.model},
               {"system_fingerprint", nullptr},
               {"choices", Json::array({choice(event.text, logprobs, finish)})}}};
}

Json CompletionReply::usage_chunk() const {
  return Json{{"id", meta_.id},       {"object", "text_completion"}, {"created", meta_.created},
              {"model", meta_.model}, {"choices", Json::array()},    {"usage", usage_json(totals_.prompt_tokens, totals_.completion_tokens, totals_.cached_tokens)}};
}

void CompletionReply::add(const RequestEvent& event) {
  totals_.note(event);
  text_ += event.text;
  append_logprobs(event, logprobs_, text_offset_);
}

Json CompletionReply::response() const {
  return Json{{"id", meta_.id},
              {"object", "text_completion"},
              {"created", meta_.created},
              {"model", meta_.model},
              {"system_fingerprint", nullptr},
              {"choices", Json::array({choice(text_, logprobs_, finish_reason_word(totals_.finish, false))})},
              {"usage", usage_json(totals_.prompt_tokens, totals_.completion_tokens, totals_.cached_tokens)}};
}

}  // namespace corvid::server
