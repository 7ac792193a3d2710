#include "corvid/server/responses_reply.h"

#include <chrono>

namespace corvid::server {

namespace {

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

template <class T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Json response_skeleton(const std::string& id, const std::string& model, int64_t created_at, const ResponseParams& p) {
  Json reasoning = {{"effort", or_null(p.effort)}, {"summary", or_null(p.summary)}};
  return Json{{"id", id},
              {"object", "response"},
              {"created_at", created_at},
              {"status", "in_progress"},
              {"background", false},
              {"completed_at", nullptr},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", or_null(p.instructions)},
              {"max_output_tokens", or_null(p.max_output_tokens)},
              {"max_tool_calls", nullptr},
              {"model", model},
              {"output", Json::array()},
              {"parallel_tool_calls", p.parallel_tool_calls},
              {"previous_response_id", p.previous_response_id.empty() ? Json(nullptr) : Json(p.previous_response_id)},
              {"prompt_cache_key", or_null(p.prompt_cache_key)},
              {"reasoning", std::move(reasoning)},
              {"safety_identifier", or_null(p.safety_identifier)},
              {"service_tier", "default"},
              {"store", p.store},
              {"temperature", p.temperature},
              {"text", p.text},
              {"tool_choice", p.tool_choice},
              {"tools", p.tools},
              {"top_logprobs", 0},
              {"top_p", p.top_p},
              {"truncation", "disabled"},
              {"usage", nullptr},
              {"user", or_null(p.user)},
              {"metadata", p.metadata}};
}

ResponseReply::ResponseReply(Json skeleton, chat::OutputParserOptions options)
    : skeleton_(std::move(skeleton)), starts_in_reasoning_(options.starts_in_reasoning), parser_(std::move(options)) {
  const std::string id = skeleton_["id"].get<std::string>();
  id_suffix_ = id.rfind("resp_", 0) == 0 ? id.substr(5) : id;
}

std::string ResponseReply::item_id(const char* prefix) const {
  return std::string(prefix) + "_" + id_suffix_ + "_" + std::to_string(items_.size());
}

bool ResponseReply::reasoning_only() const {
  if (items_.empty()) return starts_in_reasoning_;
  return items_.size() == 1 && items_.back()["type"] == "reasoning";
}

bool ResponseReply::reasoning_open() const { return !totals_.finished && reasoning_only(); }

Json ResponseReply::event(const char* type, Json fields) {
  Json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(it.value());
  return e;
}

Json ResponseReply::item_fields(Json fields) const {
  Json e = {{"item_id", items_.back()["id"]}, {"output_index", items_.size() - 1}};
  for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(it.value());
  return e;
}

std::vector<Json> ResponseReply::start() {
  std::vector<Json> out;
  out.push_back(event("response.created", {{"response", skeleton_}}));
  out.push_back(event("response.in_progress", {{"response", skeleton_}}));
  return out;
}

// An item opens with output_item.added (its content empty, status in_progress) and, for
// reasoning and messages, the content_part.added of its one text part.
void ResponseReply::open(Json item, std::vector<Json>& out) {
  close(out);
  items_.push_back(item);
  item_open_ = true;
  open_text_.clear();
  out.push_back(event("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", item}}));
  const std::string type = item["type"].get<std::string>();
  if (type == "function_call") return;
  const Json part = type == "message" ? Json{{"type", "output_text"}, {"annotations", Json::array()}, {"text", ""}}
                                      : Json{{"type", "reasoning_text"}, {"text", ""}};
  Json added = item_fields({{"content_index", 0}, {"part", part}});
  out.push_back(event("response.content_part.added", std::move(added)));
}

// The open item is done: its text's .done event, content_part.done and output_item.done
// with the whole item. A finish by max_output_tokens leaves the last item incomplete.
void ResponseReply::close(std::vector<Json>& out) {
  if (!item_open_) return;
  item_open_ = false;
  Json& item = items_.back();
  const std::string type = item["type"].get<std::string>();
  const bool cut = totals_.finished && totals_.finish == FinishReason::Length;
  item["status"] = cut ? "incomplete" : "completed";
  if (type == "function_call") {
    item["arguments"] = open_text_;
    out.push_back(event("response.function_call_arguments.done",
                        item_fields({{"name", item["name"]}, {"arguments", open_text_}})));
  } else {
    const bool message = type == "message";
    Json part = message ? Json{{"type", "output_text"}, {"annotations", Json::array()}, {"text", open_text_}}
                        : Json{{"type", "reasoning_text"}, {"text", open_text_}};
    if (message) part["logprobs"] = Json::array();
    item["content"] = Json::array({part});
    Json done = item_fields({{"content_index", 0}, {"text", open_text_}});
    if (message) done["logprobs"] = Json::array();
    out.push_back(event(message ? "response.output_text.done" : "response.reasoning_text.done", std::move(done)));
    out.push_back(event("response.content_part.done", item_fields({{"content_index", 0}, {"part", part}})));
  }
  out.push_back(event("response.output_item.done", {{"output_index", items_.size() - 1}, {"item", item}}));
}

void ResponseReply::apply(const chat::OutputEvent& e, std::vector<Json>& out) {
  using Kind = chat::OutputEvent::Kind;
  const auto open_type_is = [&](const char* type) { return item_open_ && items_.back()["type"] == type; };
  switch (e.kind) {
    case Kind::kContent:
      if (e.text.empty()) return;
      if (!open_type_is("message"))
        open({{"id", item_id("msg")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
              {"content", Json::array()}},
             out);
      open_text_ += e.text;
      out.push_back(event("response.output_text.delta",
                          item_fields({{"content_index", 0}, {"delta", e.text}, {"logprobs", Json::array()}})));
      return;
    case Kind::kReasoning:
      if (e.text.empty()) return;
      if (!open_type_is("reasoning"))
        open({{"id", item_id("rs")}, {"type", "reasoning"}, {"status", "in_progress"}, {"summary", Json::array()},
              {"content", Json::array()}},
             out);
      open_text_ += e.text;
      out.push_back(event("response.reasoning_text.delta", item_fields({{"content_index", 0}, {"delta", e.text}})));
      return;
    case Kind::kToolCallStart:
      open({{"id", item_id("fc")}, {"type", "function_call"}, {"status", "in_progress"}, {"call_id", e.id},
            {"name", e.name}, {"arguments", ""}},
           out);
      return;
    case Kind::kToolCallArguments:
      if (!open_type_is("function_call") || e.text.empty()) return;
      open_text_ += e.text;
      out.push_back(event("response.function_call_arguments.delta", item_fields({{"delta", e.text}})));
      return;
  }
}

void ResponseReply::consume(const RequestEvent& event, std::vector<Json>& out) {
  for (const chat::OutputEvent& e : parser_.feed(event.text)) apply(e, out);
  if (event.finish)
    for (const chat::OutputEvent& e : parser_.finish()) apply(e, out);
  // usage's reasoning_tokens: the tokens of events read while the reply was still only
  // reasoning (so an opening tag before any reasoning text, or an event that ends the
  // reasoning and begins the answer, is not counted).
  if (reasoning_only()) reasoning_tokens_ += static_cast<int64_t>(event.token_ids.size());
  if (!totals_.note(event)) return;
  completed_at_ = now_seconds();
  close(out);
}

std::vector<Json> ResponseReply::events(const RequestEvent& e) {
  std::vector<Json> out;
  consume(e, out);
  if (totals_.finished) {
    const Json whole = response();
    out.push_back(event(whole["status"] == "completed" ? "response.completed" : "response.incomplete",
                        {{"response", whole}}));
  }
  return out;
}

void ResponseReply::add(const RequestEvent& e) {
  std::vector<Json> ignored;
  consume(e, ignored);
}

std::vector<Json> ResponseReply::failed(const std::string& message) {
  std::vector<Json> out;
  Json whole = response();
  whole["status"] = "failed";
  whole["completed_at"] = nullptr;
  whole["incomplete_details"] = nullptr;
  whole["error"] = {{"code", "server_error"}, {"message", message}};
  out.push_back(event("response.failed", {{"response", std::move(whole)}}));
  return out;
}

Json ResponseReply::usage() const {
  return Json{{"input_tokens", totals_.prompt_tokens},
              {"input_tokens_details", {{"cached_tokens", totals_.cached_tokens}}},
              {"output_tokens", totals_.completion_tokens},
              {"output_tokens_details", {{"reasoning_tokens", std::min(reasoning_tokens_, totals_.completion_tokens)}}},
              {"total_tokens", totals_.prompt_tokens + totals_.completion_tokens}};
}

Json ResponseReply::response() const {
  Json r = skeleton_;
  Json output = Json::array();
  for (size_t i = 0; i < items_.size(); ++i)  // an item still open (a failure midway) is left out
    if (!(item_open_ && i + 1 == items_.size())) output.push_back(items_[i]);
  r["output"] = std::move(output);
  if (!totals_.finished) return r;
  const bool cut = totals_.finish == FinishReason::Length;
  r["status"] = cut ? "incomplete" : "completed";
  if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  else r["completed_at"] = completed_at_;
  r["usage"] = usage();
  return r;
}

}  // namespace corvid::server
