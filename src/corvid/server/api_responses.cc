// ApiServer's OpenAI Responses endpoints: POST /v1/responses over the same chat path as
// the other APIs (prepare_chat, the output parser, the reasoning budget), and the
// store's GET / DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items.
#include <algorithm>
#include <chrono>

#include "corvid/server/api_server.h"
#include "corvid/server/anthropic_reply.h"

namespace corvid::server {

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Input items as stored get ids as OpenAI gives them, so input_items can list them.
void assign_ids(Json& items, const std::string& response_id, size_t first) {
  const std::string suffix = response_id.substr(response_id.find('_') + 1);
  for (size_t i = first; i < items.size(); ++i) {
    Json& item = items[i];
    if (item.contains("id")) continue;
    const std::string type = item.value("type", "message");
    const char* prefix = type == "message" ? "msg" : type == "function_call" ? "fc" : type == "reasoning" ? "rs" : "fco";
    item["id"] = std::string(prefix) + "_" + suffix + "_in" + std::to_string(i - first);
  }
}

[[noreturn]] void not_found(const std::string& id) {
  throw ApiError(404, "Response with id '" + id + "' not found.", "response_id");
}

// The value of `key` in a query string ("a=1&b=2"), "" when absent.
std::string query_value(const std::string& query, const std::string& key) {
  size_t at = 0;
  while (at <= query.size()) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string pair = query.substr(at, end - at);
    if (pair.rfind(key + "=", 0) == 0) return pair.substr(key.size() + 1);
    at = end + 1;
  }
  return "";
}

}  // namespace

ApiServer::Action ApiServer::responses(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  ResponseParams p = parse_response_request(body);
  check_model(p.model);
  // The conversation: what the chained response read and answered, then this input.
  // Its instructions are not carried over (as OpenAI: each request gives its own).
  Json items = Json::array();
  if (!p.previous_response_id.empty()) {
    const std::shared_ptr<const StoredResponse> previous = store_.get(p.previous_response_id);
    if (!previous)
      throw ApiError(400, "Previous response with id '" + p.previous_response_id + "' not found.",
                     "previous_response_id", "previous_response_not_found");
    items = previous->input_items;
    for (const Json& item : previous->response["output"]) items.push_back(item);
  }
  const size_t first_new = items.size();
  for (Json& item : p.input) items.push_back(std::move(item));

  ChatRequest chat;
  chat.messages = items_to_messages(items, p.instructions);
  chat.tools = p.chat_tools;
  chat.add_generation_prompt = true;
  const std::optional<int64_t> budget_tokens = apply_effort(p.effort, template_reads(chat, "reasoning_effort"), chat);
  GenerationRequest request = std::move(p.generation);
  PreparedChat prepared = prepare_chat(chat, p.parse_tools, request);
  const bool reasons = prepared.options.reasoning != chat::ReasoningFormat::kNone;
  check_effort(chat, budget_tokens.has_value(), prepared.thinking_switch, reasons);
  constrain(request, p.format, &prepared.options, p.forcing, p.chat_tools);
  request.prompt = std::move(prepared.prompt);
  request.max_tokens = p.max_output_tokens.value_or(default_max_tokens(request.prompt.size()));
  std::optional<ThinkingBudget> budget;
  if (budget_tokens) budget = thinking_budget(*budget_tokens, prepared.options.reasoning);

  const std::string id = new_id("resp", '_');
  auto reply = std::make_shared<ResponseReply>(response_skeleton(id, config_.model_name, unix_seconds(), p),
                                               std::move(prepared.options));
  std::shared_ptr<const Json> store_input;
  if (p.store) {
    assign_ids(items, id, first_new);
    store_input = std::make_shared<const Json>(std::move(items));
  }
  return [this, exchange, request = std::move(request), stream = p.stream, reply, budget, store_input, id] {
    SseHooks hooks;
    // "event: TYPE\ndata: …" is Anthropic's grammar too: response.failed ends the stream.
    hooks.failure = [reply](int, const std::string& message) { return reply->failed(message); };
    hooks.keep_alive = ": keep-alive\n\n";  // OpenAI defines no ping event; clients skip comments
    // Stored before the client hears it finished, so that it can be chained at once.
    if (store_input)
      hooks.finished = [this, reply, store_input, id] {
        auto entry = std::make_shared<StoredResponse>();
        entry->response = reply->response();
        entry->input_items = *store_input;
        store_.put(id, std::move(entry));
      };
    drive_reply(exchange, request, stream, reply, budget, std::move(hooks));
  };
}

void ApiServer::stored_response(Exchange& exchange, const std::string& rest) {
  const HttpRequest& request = exchange.request();
  std::string target(request.target());
  const size_t q = target.find('?');
  const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
  const bool get = request.method() == boost::beast::http::verb::get;
  const bool del = request.method() == boost::beast::http::verb::delete_;
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  if (id.empty()) throw ApiError(404, "no such endpoint: /v1/responses/");

  if (slash != std::string::npos) {  // /v1/responses/{id}/input_items
    if (rest.substr(slash) != "/input_items") throw ApiError(404, "no such endpoint: /v1/responses/" + rest);
    if (!get) throw ApiError(405, "use GET for /v1/responses/{id}/input_items");
    const std::shared_ptr<const StoredResponse> entry = store_.get(id);
    if (!entry) not_found(id);
    // OpenAI's list: newest first unless order=asc, at most `limit` (20) after `after`.
    const std::string order = query_value(query, "order").empty() ? "desc" : query_value(query, "order");
    if (order != "asc" && order != "desc") throw ApiError(400, "'order' must be asc or desc", "order");
    int64_t limit = 20;
    if (const std::string l = query_value(query, "limit"); !l.empty()) {
      try {
        limit = std::stoll(l);
      } catch (const std::exception&) {
        limit = 0;
      }
      if (limit < 1 || limit > 100) throw ApiError(400, "'limit' must be an integer in [1, 100]", "limit");
    }
    const std::string after = query_value(query, "after");
    for (const char* unsupported : {"include", "before"})
      if (!query_value(query, unsupported).empty())
        throw ApiError(400, std::string("'") + unsupported + "' is not supported here", unsupported);
    std::vector<const Json*> items;
    for (const Json& item : entry->input_items) items.push_back(&item);
    if (order == "desc") std::reverse(items.begin(), items.end());
    size_t begin = 0;
    if (!after.empty()) {
      while (begin < items.size() && (*items[begin]).value("id", "") != after) ++begin;
      if (begin == items.size()) throw ApiError(400, "no input item '" + after + "' in this response", "after");
      ++begin;
    }
    Json data = Json::array();
    for (size_t i = begin; i < items.size() && data.size() < static_cast<size_t>(limit); ++i) data.push_back(*items[i]);
    const bool more = begin + data.size() < items.size();
    Json list = {{"object", "list"}, {"data", data}, {"first_id", data.empty() ? Json(nullptr) : data.front()["id"]},
                 {"last_id", data.empty() ? Json(nullptr) : data.back()["id"]}, {"has_more", more}};
    return respond(exchange, 200, list);
  }
  if (!query.empty()) throw ApiError(400, "query parameters (streaming a stored response, include) are not supported here");
  if (get) {
    const std::shared_ptr<const StoredResponse> entry = store_.get(id);
    if (!entry) not_found(id);
    return respond(exchange, 200, entry->response);
  }
  if (del) {
    if (!store_.erase(id)) not_found(id);
    return respond(exchange, 200, Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  }
  throw ApiError(405, "use GET or DELETE for /v1/responses/{id}");
}

}  // namespace corvid::server
