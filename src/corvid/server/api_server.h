// The OpenAI-compatible (chat, completions, Responses, embeddings, audio) and Anthropic Messages APIs over the
// engine: routes each HTTP exchange to its endpoint, checks the API key, and drives generations from engine
// events. Errors take the shape of the route's API, whatever raised them.
//
// Engine events arrive on the engine thread; the callback only posts them to the
// exchange's connection strand, where the reply is built and written (the engine
// thread never waits on a client). A client that goes away cancels its request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "corvid/chat/chat_template.h"
#include "corvid/engine/embedder.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/structured_output.h"
#include "corvid/chat/output_parser.h"
#include "corvid/server/anthropic_reply.h"
#include "corvid/server/audio_api.h"
#include "corvid/server/http.h"
#include "corvid/server/metrics.h"
#include "corvid/server/openai_api.h"
#include "corvid/server/output_format.h"
#include "corvid/server/response_store.h"
#include "corvid/server/responses_reply.h"

namespace corvid::server {

struct ApiConfig {
  std::string model_name;              // what /v1/models lists and requests may name
  std::string api_key;                 // empty: no authentication
  std::vector<int32_t> chat_stop_ids;  // end-of-turn tokens that end a chat reply (besides EOS)
  size_t responses_store_bytes = size_t{64} << 20;  // the Responses API's store (--responses-store-mb)
};

class ApiServer {
 public:
  // chat_template may be null (then chat endpoints answer 400). All must outlive the server.
  // With a speech backend, the /v1/audio/ routes transcribe too (else they answer 400).
  ApiServer(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate* chat_template, ApiConfig config,
            SpeechBackend speech = {});
  // An embeddings server (--task embed): /v1/embeddings, /tokenize, /detokenize,
  // /v1/models, /metrics; the generation endpoints answer 400.
  ApiServer(Embedder& embedder, const Tokenizer& tokenizer, ApiConfig config, SpeechBackend speech = {});
  // A speech-only server: /v1/audio/, /v1/models, /metrics; the text endpoints answer
  // 400. `tokenizer` is the speech model's (the server needs one; no route uses it).
  ApiServer(SpeechBackend speech, const Tokenizer& tokenizer, ApiConfig config);

  void handle(const std::shared_ptr<Exchange>& exchange);
  // From now on generation requests get 503 (the server is shutting down).
  void drain() { draining_ = true; }
  // Waits for the worker pool to finish what it holds (before the io_context it posts to goes away).
  void join_workers() { workers_.join(); }
  const Metrics& metrics() const { return metrics_; }
  // A response the HTTP layer sent on its own (http.h RefusalCounter): counted by status.
  void count_refused(int status) { metrics_.count_response(status); }
  // The body of such a response, in the shape of the API its target belongs to (http.h RefusalBody).
  std::string refusal_body(int status, const std::string& message, const std::string& target) const;

 private:
  // At most one of engine and embedder is set: the server's text task (none: speech only).
  ApiServer(Engine* engine, Embedder* embedder, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
            ApiConfig config, SpeechBackend speech);

  // What an endpoint decided on the worker pool, to run on the exchange's strand.
  using Action = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  void route(const std::shared_ptr<Exchange>& exchange);
  // Runs f, answering any exception with its error response. On the strand.
  template <class F>
  void guarded(Exchange& exchange, F&& f);
  Action chat_completions(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action completions(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action tokenize(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action detokenize(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action apply_template(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action messages(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action count_tokens(const std::shared_ptr<Exchange>& exchange, const Json& body);
  Action responses(const std::shared_ptr<Exchange>& exchange, const Json& body);
  // POST /v1/embeddings: submits the inputs to the embedder, answers from its callback.
  Action embeddings(const std::shared_ptr<Exchange>& exchange, const Json& body);
  // POST /v1/audio/transcriptions and /translations: parses the form and decodes the
  // upload (on the worker pool); the action submits it to the speech service, whose
  // callbacks post the answer (or its stream's events) to the exchange's strand.
  Action transcribe(const std::shared_ptr<Exchange>& exchange, const std::string& path);
  // GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items (`rest`: the
  // path after /v1/responses/). On the strand: the store's lock is held only briefly.
  void stored_response(Exchange& exchange, const std::string& rest);
  Action respond_later(const std::shared_ptr<Exchange>& exchange, Json body);
  void models(const std::shared_ptr<Exchange>& exchange);
  Json model_json() const;
  Json speech_model_json() const;

  // Submits the request (once per choice: one reply each) and answers the exchange from
  // their events (Reply: ChatReply or CompletionReply). Throws RequestRejected when the
  // engine refuses any of them (then none runs).
  template <class Reply>
  void generate(const std::shared_ptr<Exchange>& exchange, const GenerationRequest& request, const CommonParams& params,
                const std::vector<std::shared_ptr<Reply>>& replies);

  // A reasoning budget (Anthropic's thinking.budget_tokens, Responses' reasoning.effort):
  // after this many tokens of open reasoning, the engine is made to write `close` (the
  // format's end-of-reasoning marker). `used` and `spent` are counted on the strand.
  struct ThinkingBudget {
    int64_t tokens = 0;
    std::vector<int32_t> close;
    int64_t used = 0;
    bool spent = false;
  };
  ThinkingBudget thinking_budget(int64_t tokens, chat::ReasoningFormat format) const;
  // Counts an event's tokens while `reasoning_open` (the reply still reasoning once the
  // event is read) and, once the budget is spent, makes the engine close the reasoning.
  void spend_budget(std::optional<ThinkingBudget>& budget, int64_t request_id, bool reasoning_open,
                    const RequestEvent& event);
  // What the two APIs whose streams are `event:`/`data:` SSE (Anthropic's Messages and
  // Responses) do differently while their one engine request's events are driven.
  struct SseHooks {
    // The events a stream ends with when generation fails (status, message).
    std::function<std::vector<Json>(int, const std::string&)> failure;
    // Runs once the reply is whole, before the client hears so (Responses stores it
    // there, so that it can be chained at once). May be empty.
    std::function<void()> finished;
    // What a stream sends after 10 s with nothing sent (a long prompt, a full batch), so
    // that proxies and clients with read timeouts keep it: Anthropic's ping event, or an
    // SSE comment line (which SSE clients skip). Empty: nothing.
    std::string keep_alive;
  };
  // Submits `request` and answers the exchange from its events through `reply`
  // (MessageReply or ResponseReply: start(), events(), add(), response(), finished(),
  // reasoning_open()), streamed or whole, spending `budget` on the way.
  template <class Reply>
  void drive_reply(const std::shared_ptr<Exchange>& exchange, GenerationRequest request, bool stream,
                   const std::shared_ptr<Reply>& reply, std::optional<ThinkingBudget> budget, SseHooks hooks);

  // Per sequence: time to first token and between tokens, end to end (metrics).
  struct Latency {
    Clock::time_point start, last_token;
    bool any_token = false;
  };
  void observe(Latency& latency, const RequestEvent& event);

  // A chat request rendered with the template and tokenized, with the output parser's
  // options for it and the engine's chat settings (end-of-turn stops, special tokens).
  struct PreparedChat {
    std::vector<int32_t> prompt;
    chat::OutputParserOptions options;
    bool thinking_switch = false;  // the template reads enable_thinking
  };
  PreparedChat prepare_chat(const ChatRequest& chat, bool parse_tools, GenerationRequest& request) const;
  // Holds `request` to `format` (compiled here, on the worker pool; a bad schema is a
  // 400). With `options` (a chat reply): a prompt that opened reasoning leaves the
  // reasoning free and starts the format after its end marker, and a forced tool call
  // makes the parser read the answer as the calls.
  void constrain(GenerationRequest& request, const std::optional<OutputFormat>& format,
                 chat::OutputParserOptions* options = nullptr, const std::optional<ToolForcing>& forcing = {},
                 const Json& tools = Json()) const;
  const FormatCompiler& formats() const;  // made on first use (it reads the whole vocabulary)
  // Whether the template that would render `chat` mentions `variable` (before rendering:
  // which variables to set depends on it).
  bool template_reads(const ChatRequest& chat, const char* variable) const;

  void check_key(const HttpRequest& request) const;
  void check_model(const std::string& requested) const;
  void check_speech_model(const std::string& requested) const;
  int64_t default_max_tokens(size_t prompt_tokens) const;
  std::string render(const ChatRequest& request) const;
  std::string new_id(const char* prefix, char separator = '-');
  void respond(Exchange& exchange, int status, const Json& body);
  void respond_error(Exchange& exchange, int status, const std::string& message, const std::string& param = "",
                     const std::string& code = "");
  Json error_json(const Exchange& exchange, int status, const std::string& message, const std::string& param = "",
                  const std::string& code = "") const;

  Engine* engine_ = nullptr;      // a generation server's
  Embedder* embedder_ = nullptr;  // an embeddings server's
  SpeechBackend speech_;          // the audio routes' (service null: none)
  const Tokenizer& tokenizer_;
  const ChatTemplate* chat_template_;
  mutable std::mutex template_mutex_;  // rendering is not promised to be reentrant
  ApiConfig config_;
  Metrics metrics_;
  ResponseStore store_;
  mutable std::mutex formats_mutex_;
  mutable std::unique_ptr<FormatCompiler> formats_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{0};
  uint64_t id_salt_ = 0;
  int64_t created_ = 0;
  boost::asio::thread_pool workers_{2};  // last: joined first, while the rest is alive
};

// JSON text for the wire: invalid UTF-8 (never expected) is replaced, not thrown on.
std::string to_text(const Json& json);

}  // namespace corvid::server
