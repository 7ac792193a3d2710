#include "corvid/server/api_server.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "corvid/server/anthropic_api.h"
#include "corvid/server/openai_reply.h"
#include "corvid/server/web_chat.h"
#include "corvid/template/jinja.h"

namespace corvid::server {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string sse(const Json& json) { return "data: " + to_text(json) + "\n\n"; }

// Compares in time that depends only on the lengths, so timing does not reveal the key.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0 && !b.empty();
}

int status_of(RequestRejected::Reason reason) {
  switch (reason) {
    case RequestRejected::Reason::QueueFull: return 429;
    case RequestRejected::Reason::Unavailable: return 503;
    default: return 400;
  }
}

}  // namespace

std::string to_text(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

ApiServer::ApiServer(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate* chat_template, ApiConfig config,
                     SpeechBackend speech)
    : ApiServer(&engine, nullptr, tokenizer, chat_template, std::move(config), std::move(speech)) {}

ApiServer::ApiServer(Embedder& embedder, const Tokenizer& tokenizer, ApiConfig config, SpeechBackend speech)
    : ApiServer(nullptr, &embedder, tokenizer, nullptr, std::move(config), std::move(speech)) {}

ApiServer::ApiServer(SpeechBackend speech, const Tokenizer& tokenizer, ApiConfig config)
    : ApiServer(nullptr, nullptr, tokenizer, nullptr, std::move(config), std::move(speech)) {}

ApiServer::ApiServer(Engine* engine, Embedder* embedder, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
                     ApiConfig config, SpeechBackend speech)
    : engine_(engine),
      embedder_(embedder),
      speech_(std::move(speech)),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      config_(std::move(config)),
      store_(config_.responses_store_bytes) {
  id_salt_ = std::random_device{}();
  id_salt_ = (id_salt_ << 32) ^ std::random_device{}();
  created_ = unix_time();
}

std::string ApiServer::new_id(const char* prefix, char separator) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%c%016llx%08llx", prefix, separator, static_cast<unsigned long long>(id_salt_),
                static_cast<unsigned long long>(next_id_++));
  return buf;
}

void ApiServer::respond(Exchange& exchange, int status, const Json& body) {
  metrics_.count_response(status);
  exchange.respond(status, to_text(body));
}

Json ApiServer::error_json(const Exchange& exchange, int status, const std::string& message, const std::string& param,
                           const std::string& code) const {
  const auto target = exchange.request().target();
  if (is_anthropic_path(std::string_view(target.data(), target.size()))) return anthropic_error_body(status, message);
  return error_body(status, message, param, code);
}

void ApiServer::respond_error(Exchange& exchange, int status, const std::string& message, const std::string& param,
                              const std::string& code) {
  respond(exchange, status, error_json(exchange, status, message, param, code));
}

std::string ApiServer::refusal_body(int status, const std::string& message, const std::string& target) const {
  return to_text(is_anthropic_path(target) ? anthropic_error_body(status, message) : error_body(status, message));
}

void ApiServer::handle(const std::shared_ptr<Exchange>& exchange) {
  guarded(*exchange, [&] { route(exchange); });
}

template <class F>
void ApiServer::guarded(Exchange& exchange, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    respond_error(exchange, e.status(), e.what(), e.param(), e.code());
  } catch (const RequestRejected& e) {
    respond_error(exchange, status_of(e.reason()), e.what());
  } catch (const jinja::RaisedException& e) {
    respond_error(exchange, 400, std::string("the chat template refused the request: ") + e.what());
  } catch (const Error& e) {
    respond_error(exchange, 400, e.what());
  } catch (const std::exception& e) {
    respond_error(exchange, 400, std::string("bad request: ") + e.what());
  } catch (...) {
    respond_error(exchange, 500, "internal error");
  }
}

void ApiServer::route(const std::shared_ptr<Exchange>& exchange) {
  const HttpRequest& request = exchange->request();
  std::string path(request.target());
  if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  const bool get = request.method() == boost::beast::http::verb::get;
  const bool post = request.method() == boost::beast::http::verb::post;

  if (path == "/health") {
    if (!get) throw ApiError(405, "use GET for /health");
    return respond(*exchange, 200, Json{{"status", "ok"}});
  }
  // The chat page holds no data and asks for the key itself, so it needs none. Its
  // policy lets it run only its own inline script and talk only to this server.
  if (path == "/" || path == "/index.html") {
    if (!get) throw ApiError(405, "use GET for " + path);
    metrics_.count_response(200);
    return exchange->respond(200, std::string(web_chat_page()), "text/html; charset=utf-8",
                             "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
                             "style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; base-uri 'none'; "
                             "form-action 'none'; frame-ancestors 'none'\r\n"
                             "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
                             "Cache-Control: no-cache\r\n");
  }
  check_key(request);

  struct Route {
    const char* path;
    bool post;
  };
  static const Route routes[] = {{"/v1/chat/completions", true}, {"/v1/completions", true},
                                 {"/v1/messages", true},         {"/v1/messages/count_tokens", true},
                                 {"/v1/responses", true},        {"/v1/embeddings", true},
                                 {"/tokenize", true},            {"/detokenize", true},
                                 {"/apply-template", true},      {"/v1/models", false},
                                 {"/metrics", false},            {"/v1/audio/transcriptions", true},
                                 {"/v1/audio/translations", true}};
  const bool text_model = engine_ || embedder_;
  if (get && path.rfind("/v1/models/", 0) == 0) {  // one model (client.models.retrieve)
    const std::string name = path.substr(std::string("/v1/models/").size());
    if (text_model && name == config_.model_name) return respond(*exchange, 200, model_json());
    if (speech_.service && name == speech_.model_name) return respond(*exchange, 200, speech_model_json());
    throw ApiError(404, "the model '" + name + "' does not exist", "model", "model_not_found");
  }
  if (path.rfind("/v1/responses/", 0) == 0) return stored_response(*exchange, path.substr(std::string("/v1/responses/").size()));
  const Route* found = nullptr;
  for (const Route& r : routes)
    if (path == r.path) found = &r;
  if (!found) throw ApiError(404, "no such endpoint: " + path);
  if (found->post ? !post : !get) throw ApiError(405, std::string("use ") + (found->post ? "POST" : "GET") + " for " + path);

  if (path == "/v1/models") return models(exchange);
  if (path == "/metrics") {
    metrics_.count_response(200);
    return exchange->respond(200, metrics_.render(engine_ ? engine_->stats() : EngineStats{}, config_.model_name),
                             "text/plain; version=0.0.4");
  }
  // A server runs one text task, generation (the Engine) or embeddings (the Embedder),
  // and speech beside it when it has a speech model; or speech alone.
  const bool upload = is_audio_path(path);
  const bool tokens_only = path == "/tokenize" || path == "/detokenize";
  if (upload) {
    if (!speech_.service)
      throw ApiError(400, "this server has no speech model: " + path + " needs a server started with --speech-model");
  } else {
    if (!text_model)
      throw ApiError(400, "this server serves speech only (--speech-model without -m): " + path +
                              " needs a server started with -m");
    if (path == "/v1/embeddings" && !embedder_)
      throw ApiError(400, "this server generates text: /v1/embeddings needs a server started with --task embed");
    if (!engine_ && path != "/v1/embeddings" && !tokens_only)
      throw ApiError(400, "this server serves embeddings (--task embed): " + path + " needs a server that generates");
  }
  if (draining_ && path.rfind("/v1/", 0) == 0) throw ApiError(503, "the server is shutting down");
  // Parsing, rendering and tokenizing a body (up to the body limit) is CPU work: it runs
  // on the worker pool, and only what it decides comes back to the connection's strand.
  boost::asio::post(workers_, [this, exchange, path, upload] {
    Action then;
    try {
      const Json body = upload ? Json() : parse_body(exchange->request().body());  // a form, not JSON
      if (upload) then = transcribe(exchange, path);
      else if (path == "/tokenize") then = tokenize(exchange, body);
      else if (path == "/detokenize") then = detokenize(exchange, body);
      else if (path == "/apply-template") then = apply_template(exchange, body);
      else if (path == "/v1/chat/completions") then = chat_completions(exchange, body);
      else if (path == "/v1/messages") then = messages(exchange, body);
      else if (path == "/v1/messages/count_tokens") then = count_tokens(exchange, body);
      else if (path == "/v1/responses") then = responses(exchange, body);
      else if (path == "/v1/embeddings") then = embeddings(exchange, body);
      else then = completions(exchange, body);
    } catch (...) {
      then = [error = std::current_exception()] { std::rethrow_exception(error); };
    }
    exchange->post([this, exchange, then] {
      if (!exchange->done()) guarded(*exchange, then);
    });
  });
}

// Either header carries the key: OpenAI clients send Authorization, Anthropic's x-api-key
// (or Authorization with an auth token).
void ApiServer::check_key(const HttpRequest& request) const {
  if (config_.api_key.empty()) return;
  const auto auth = request.find(boost::beast::http::field::authorization);
  const auto x_api_key = request.find("x-api-key");
  if (auth == request.end() && x_api_key == request.end())
    throw ApiError(401, "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'", "", "invalid_api_key");
  const bool good = (auth != request.end() && same_secret(std::string(auth->value()), "Bearer " + config_.api_key)) ||
                    (x_api_key != request.end() && same_secret(std::string(x_api_key->value()), config_.api_key));
  if (!good) throw ApiError(401, "incorrect API key provided", "", "invalid_api_key");
}

void ApiServer::check_model(const std::string& requested) const {
  if (!requested.empty() && requested != config_.model_name)
    throw ApiError(404, "the model '" + requested + "' does not exist (this server serves '" + config_.model_name + "')",
                   "model", "model_not_found");
}

int64_t ApiServer::default_max_tokens(size_t prompt_tokens) const {
  // As many as fit: the context length and the KV cache both bound a sequence.
  const int64_t limit = std::min(engine_->max_model_len(), engine_->max_tokens_per_sequence());
  return std::max<int64_t>(1, limit - static_cast<int64_t>(prompt_tokens));
}

bool ApiServer::template_reads(const ChatRequest& chat, const char* variable) const {
  if (!chat_template_) return false;
  std::lock_guard<std::mutex> lock(template_mutex_);
  return chat_template_->source(chat).find(variable) != std::string::npos;
}

std::string ApiServer::render(const ChatRequest& request) const {
  if (!chat_template_) throw ApiError(400, "the model has no chat template; use /v1/completions");
  std::lock_guard<std::mutex> lock(template_mutex_);
  return chat_template_->render(request);
}

ApiServer::PreparedChat ApiServer::prepare_chat(const ChatRequest& chat, bool parse_tools,
                                                GenerationRequest& request) const {
  const std::string prompt = render(chat);
  std::string source;
  {
    std::lock_guard<std::mutex> lock(template_mutex_);
    source = chat_template_->source(chat);
  }
  const nlohmann::json tools = parse_tools ? nlohmann::json(chat.tools) : nlohmann::json::array();
  PreparedChat out;
  out.options = chat::detect_output_options(source, prompt, tools);
  out.thinking_switch = source.find("enable_thinking") != std::string::npos;
  out.prompt = tokenizer_.encode(prompt, /*add_special_tokens=*/false);  // the template wrote BOS itself
  // ignore_eos (benchmarks' fixed output lengths) also passes the end-of-turn tokens.
  if (!request.ignore_eos) request.stop_token_ids = config_.chat_stop_ids;
  // The parser's markers may be special tokens: keep them in the text when it has any to find.
  request.skip_special_tokens =
      out.options.reasoning == chat::ReasoningFormat::kNone && out.options.tools_format == chat::ToolFormat::kNone;
  return out;
}

ApiServer::Action ApiServer::chat_completions(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  ChatParams p = parse_chat_request(body);
  check_model(p.common.model);
  GenerationRequest request = std::move(p.common.generation);
  PreparedChat prepared = prepare_chat(p.chat, p.parse_tools, request);
  constrain(request, p.common.format, &prepared.options, p.forcing, p.chat.tools);
  const chat::OutputParserOptions& options = prepared.options;
  request.prompt = std::move(prepared.prompt);
  request.max_tokens = p.common.max_tokens.value_or(default_max_tokens(request.prompt.size()));
  const ReplyMeta meta{new_id("chatcmpl"), config_.model_name, unix_time()};
  std::vector<std::shared_ptr<ChatReply>> replies;
  for (int i = 0; i < p.common.n; ++i) replies.push_back(std::make_shared<ChatReply>(meta.with_index(i), options, &tokenizer_));
  return [this, exchange, request, common = p.common, replies] { generate(exchange, request, common, replies); };
}

ApiServer::Action ApiServer::completions(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  CompletionParams p = parse_completion_request(body);
  check_model(p.common.model);
  GenerationRequest request = std::move(p.common.generation);
  request.prompt = p.prompt_is_tokens ? p.prompt_tokens : tokenizer_.encode(p.prompt_text, /*add_special_tokens=*/true);
  request.max_tokens = p.common.max_tokens.value_or(16);  // OpenAI's default for completions
  constrain(request, p.common.format);
  const ReplyMeta meta{new_id("cmpl"), config_.model_name, unix_time()};
  std::vector<std::shared_ptr<CompletionReply>> replies;
  for (int i = 0; i < p.common.n; ++i) replies.push_back(std::make_shared<CompletionReply>(meta.with_index(i), &tokenizer_));
  return [this, exchange, request, common = p.common, replies] { generate(exchange, request, common, replies); };
}

template <class Reply>
void ApiServer::generate(const std::shared_ptr<Exchange>& exchange, const GenerationRequest& request,
                         const CommonParams& params, const std::vector<std::shared_ptr<Reply>>& replies) {
  // n choices are n engine requests over the same prompt (seeds seed, seed+1, ...);
  // the answer is complete when all have finished.
  const size_t n = replies.size();
  struct State {
    std::vector<Latency> latency;
    std::vector<int64_t> ids;
    size_t finished = 0;
  };
  auto state = std::make_shared<State>();
  state->latency.assign(n, Latency{exchange->arrived(), {}, false});
  const bool stream = params.stream, include_usage = params.include_usage;
  Exchange* raw = exchange.get();

  // The usage of all choices: one prompt, every choice's completion.
  auto total_usage = [replies](Json usage) {
    int64_t completion = 0;
    for (const auto& r : replies) completion += r->usage_chunk()["usage"]["completion_tokens"].template get<int64_t>();
    usage["completion_tokens"] = completion;
    usage["total_tokens"] = usage["prompt_tokens"].template get<int64_t>() + completion;
    return usage;
  };

  for (size_t i = 0; i < n; ++i) {
    // Runs on the strand, in order: the engine thread posts each event.
    auto on_event = [this, exchange, state, replies, i, stream, include_usage, total_usage](const RequestEvent& event) {
      if (exchange->done()) return;  // the client went away (or another choice failed)
      Reply& reply = *replies[i];
      observe(state->latency[i], event);
      if (event.finish == FinishReason::Cancelled || event.finish == FinishReason::Error) {
        for (int64_t id : state->ids) engine_->cancel(id);  // the other choices are of no use now
        const int status = event.finish == FinishReason::Cancelled ? 503 : 500;
        const std::string message = event.finish == FinishReason::Cancelled
                                        ? "the request was cancelled (the server is shutting down)"
                                        : "generation failed: " + event.error;
        if (!stream) return respond_error(*exchange, status, message);
        exchange->send(sse(error_body(status, message)));
        exchange->send("data: [DONE]\n\n");
        return exchange->end_stream();
      }
      if (!stream) {
        reply.add(event);
        if (!reply.finished() || ++state->finished < replies.size()) return;
        Json whole = replies[0]->response();
        for (size_t k = 1; k < replies.size(); ++k) whole["choices"].push_back(replies[k]->response()["choices"][0]);
        whole["usage"] = total_usage(whole["usage"]);
        return respond(*exchange, 200, whole);
      }
      for (Json& chunk : reply.chunks(event)) {
        if (include_usage) chunk["usage"] = nullptr;  // OpenAI: every chunk but the last has a null usage
        exchange->send(sse(chunk));
      }
      if (!reply.finished() || ++state->finished < replies.size()) return;
      if (include_usage) {
        Json chunk = replies[0]->usage_chunk();
        chunk["usage"] = total_usage(chunk["usage"]);
        exchange->send(sse(chunk));
      }
      exchange->send("data: [DONE]\n\n");
      exchange->end_stream();
    };
    GenerationRequest choice = request;
    if (choice.sampling.seed && i > 0) choice.sampling.seed = *choice.sampling.seed + i;
    choice.on_event = [exchange, on_event](const RequestEvent& event) {
      exchange->post([on_event, event] { on_event(event); });
    };
    try {
      state->ids.push_back(engine_->submit(std::move(choice)).id());
    } catch (...) {
      for (int64_t id : state->ids) engine_->cancel(id);  // all choices or none
      throw;
    }
  }
  // On the strand, as the submits: no disconnect is missed.
  raw->on_cancel([this, state] {
    for (int64_t id : state->ids) engine_->cancel(id);
  });
  if (stream) {
    metrics_.count_response(200);
    raw->begin_stream();
    if constexpr (std::is_same_v<Reply, ChatReply>)
      for (const auto& reply : replies) {
        Json chunk = reply->role_chunk();
        if (include_usage) chunk["usage"] = nullptr;
        raw->send(sse(chunk));
      }
  }
}

void ApiServer::observe(Latency& latency, const RequestEvent& event) {
  const Clock::time_point now = Clock::now();
  if (!event.token_ids.empty()) {
    if (!latency.any_token) {
      metrics_.observe_ttft(seconds_between(latency.start, now));
    } else {
      const double each = seconds_between(latency.last_token, now) / static_cast<double>(event.token_ids.size());
      for (size_t t = 0; t < event.token_ids.size(); ++t) metrics_.observe_inter_token(each);
    }
    latency.any_token = true;
    latency.last_token = now;
  }
  if (event.finish) metrics_.observe_e2e(seconds_between(latency.start, now));
}

ApiServer::Action ApiServer::messages(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  MessageParams p = parse_message_request(body);
  check_model(p.model);
  GenerationRequest request = std::move(p.generation);
  PreparedChat prepared = prepare_chat(p.chat, p.parse_tools, request);
  check_thinking_switch(p, prepared.thinking_switch, prepared.options.reasoning != chat::ReasoningFormat::kNone);
  constrain(request, p.format, &prepared.options, p.forcing, p.chat.tools);
  request.prompt = std::move(prepared.prompt);
  request.max_tokens = p.max_tokens;
  std::optional<ThinkingBudget> budget;
  if (p.thinking_budget) budget = thinking_budget(*p.thinking_budget, prepared.options.reasoning);
  auto reply = std::make_shared<MessageReply>(new_id("msg", '_'), config_.model_name, std::move(prepared.options),
                                              p.omit_thinking, static_cast<int64_t>(request.prompt.size()));
  return [this, exchange, request = std::move(request), stream = p.stream, reply, budget] {
    // Anthropic's mid-stream error: an error event, and no message_stop.
    SseHooks hooks{[](int status, const std::string& message) {
                     return std::vector<Json>{anthropic_error_body(status, message)};
                   },
                   nullptr, anthropic_sse(Json{{"type", "ping"}})};
    drive_reply(exchange, request, stream, reply, budget, std::move(hooks));
  };
}

ApiServer::Action ApiServer::count_tokens(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  const MessageParams p = parse_count_tokens_request(body);
  check_model(p.model);
  GenerationRequest unused;
  const PreparedChat prepared = prepare_chat(p.chat, p.parse_tools, unused);
  check_thinking_switch(p, prepared.thinking_switch, prepared.options.reasoning != chat::ReasoningFormat::kNone);
  return respond_later(exchange, Json{{"input_tokens", prepared.prompt.size()}});
}

ApiServer::ThinkingBudget ApiServer::thinking_budget(int64_t tokens, chat::ReasoningFormat format) const {
  return ThinkingBudget{tokens, tokenizer_.encode(reasoning_close_marker(format), /*add_special_tokens=*/false)};
}

void ApiServer::spend_budget(std::optional<ThinkingBudget>& budget, int64_t request_id, bool reasoning_open,
                             const RequestEvent& event) {
  if (!budget || budget->spent || !reasoning_open) return;
  // The budget spent, the engine "writes" the close of the reasoning next (tokens made
  // before it sees that still come: the reasoning may run a step or two over).
  budget->used += static_cast<int64_t>(event.token_ids.size());
  if (budget->used < budget->tokens) return;
  engine_->force_tokens(request_id, budget->close);
  budget->spent = true;
}

template <class Reply>
void ApiServer::drive_reply(const std::shared_ptr<Exchange>& exchange, GenerationRequest request, bool stream,
                            const std::shared_ptr<Reply>& reply, std::optional<ThinkingBudget> budget,
                            SseHooks hooks) {
  struct State {
    Latency latency;
    Clock::time_point last_sent = Clock::now();
    int64_t id = 0;
    std::optional<ThinkingBudget> budget;
    SseHooks hooks;
  };
  auto state = std::make_shared<State>();
  state->latency = Latency{exchange->arrived(), {}, false};
  state->budget = std::move(budget);
  state->hooks = std::move(hooks);
  // On the strand, in order: the engine thread posts each event.
  auto on_event = [this, exchange, state, reply, stream](const RequestEvent& event) {
    if (exchange->done()) return;  // the client went away
    observe(state->latency, event);
    if (event.finish == FinishReason::Cancelled || event.finish == FinishReason::Error) {
      const int status = event.finish == FinishReason::Cancelled ? 503 : 500;
      const std::string message = event.finish == FinishReason::Cancelled
                                      ? "the request was cancelled (the server is shutting down)"
                                      : "generation failed: " + event.error;
      if (!stream) return respond_error(*exchange, status, message);
      std::string out;
      for (const Json& e : state->hooks.failure(status, message)) out += anthropic_sse(e);
      exchange->send(std::move(out));
      return exchange->end_stream();
    }
    std::vector<Json> events;
    if (stream) {
      events = reply->events(event);
    } else {
      reply->add(event);
    }
    spend_budget(state->budget, state->id, reply->reasoning_open(), event);
    if (reply->finished() && state->hooks.finished) state->hooks.finished();
    if (!stream) {
      if (reply->finished()) respond(*exchange, 200, reply->response());
      return;
    }
    std::string out;
    for (const Json& e : events) out += anthropic_sse(e);
    if (!out.empty()) state->last_sent = Clock::now();
    exchange->send(std::move(out));
    if (reply->finished()) exchange->end_stream();
  };
  request.on_event = [exchange, on_event](const RequestEvent& event) {
    exchange->post([on_event, event] { on_event(event); });
  };
  const int64_t id = engine_->submit(std::move(request)).id();
  state->id = id;  // before any event: they come to this strand after this function
  // On the strand, as the submit: no disconnect is missed.
  exchange->on_cancel([this, id] { engine_->cancel(id); });
  if (!stream) return;
  metrics_.count_response(200);
  exchange->begin_stream();
  std::string out;
  for (const Json& e : reply->start()) out += anthropic_sse(e);
  exchange->send(std::move(out));
  if (state->hooks.keep_alive.empty()) return;
  constexpr std::chrono::seconds kQuiet{10};
  exchange->every(std::chrono::milliseconds(1000), [state, kQuiet](Exchange& ex) {
    if (Clock::now() - state->last_sent < kQuiet) return;
    ex.send(state->hooks.keep_alive);
    state->last_sent = Clock::now();
  });
}

template void ApiServer::drive_reply<MessageReply>(const std::shared_ptr<Exchange>&, GenerationRequest, bool,
                                                   const std::shared_ptr<MessageReply>&,
                                                   std::optional<ThinkingBudget>, SseHooks);
template void ApiServer::drive_reply<ResponseReply>(const std::shared_ptr<Exchange>&, GenerationRequest, bool,
                                                    const std::shared_ptr<ResponseReply>&,
                                                    std::optional<ThinkingBudget>, SseHooks);

ApiServer::Action ApiServer::tokenize(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
  bool add_special = false, with_pieces = false;
  if (body.contains("add_special")) {
    if (!body["add_special"].is_boolean()) throw ApiError(400, "'add_special' must be true or false", "add_special");
    add_special = body["add_special"].get<bool>();
  }
  if (body.contains("with_pieces") && body["with_pieces"].is_boolean()) with_pieces = body["with_pieces"].get<bool>();
  const std::vector<int32_t> ids = tokenizer_.encode(body["content"].get<std::string>(), add_special);
  Json tokens = Json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const int32_t one[1] = {id};
    tokens.push_back({{"id", id}, {"piece", tokenizer_.decode(one, /*skip_special_tokens=*/false)}});
  }
  return respond_later(exchange, Json{{"tokens", tokens}});
}

ApiServer::Action ApiServer::detokenize(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be a list of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const Json& id : body["tokens"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer_.vocab_size())
      throw ApiError(400, "'tokens' must hold token ids in [0, " + std::to_string(tokenizer_.vocab_size()) + ")", "tokens");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return respond_later(exchange, Json{{"content", tokenizer_.decode(ids, /*skip_special_tokens=*/false)}});
}

ApiServer::Action ApiServer::apply_template(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  const ChatParams p = parse_chat_request(body);
  return respond_later(exchange, Json{{"prompt", render(p.chat)}});
}

ApiServer::Action ApiServer::respond_later(const std::shared_ptr<Exchange>& exchange, Json body) {
  return [this, exchange, body = std::move(body)] { respond(*exchange, 200, body); };
}

Json ApiServer::model_json() const {
  return Json{{"id", config_.model_name},
              {"object", "model"},
              {"created", created_},
              {"owned_by", "corvid"},
              {"max_model_len", engine_ ? engine_->max_model_len() : embedder_->max_input_tokens()}};
}

Json ApiServer::speech_model_json() const {
  return Json{{"id", speech_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "corvid"}};
}

void ApiServer::models(const std::shared_ptr<Exchange>& exchange) {
  Json data = Json::array();
  if (engine_ || embedder_) data.push_back(model_json());
  if (speech_.service) data.push_back(speech_model_json());
  respond(*exchange, 200, Json{{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace corvid::server
