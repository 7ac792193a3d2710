// What a client hands the serving engine (GenerationRequest) and what it gets back
// (RequestEvent, through a RequestHandle or a callback).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/engine/sampler.h"

namespace corvid {

class CompiledFormat;

enum class FinishReason { Stop, Length, Cancelled, Error };
// "stop", "length", "cancelled", "error" (OpenAI's finish_reason words where they exist).
const char* finish_reason_name(FinishReason reason);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // natural log of the model's probability (before penalties and temperature)
};

// One update of a request: the tokens sampled since the last event and the text
// they release, and on the last event the finish reason and usage.
struct RequestEvent {
  int64_t request_id = 0;
  std::string text;                // new text; empty while held back (a possible stop string)
  std::vector<int32_t> token_ids;  // new tokens
  std::vector<float> logprobs;     // per new token, when asked
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per new token, when asked (most likely first)
  std::optional<FinishReason> finish;
  std::string error;               // the message when finish is Error
  std::string stop_string;         // the stop string that ended it (finish Stop), "" for a stop token
  // Usage, filled on the finishing event.
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_token_ids;  // besides the tokenizer's EOS ids
  std::vector<std::string> stop;        // stop strings, matched on the decoded text (not returned)
  bool ignore_eos = false;              // do not stop at the tokenizer's EOS ids
  bool logprobs = false;                // logprob of each sampled token
  int top_logprobs = 0;                 // and the k most likely alternatives, 0..20
  bool skip_special_tokens = true;      // in the returned text
  // Structured output: the text must follow this format (engine/structured_output.h,
  // compiled by the caller off the engine thread); null: free text. It is enforced from
  // the first token, or once the output ends with `format_after` (a reasoning model's
  // end-of-thinking marker: the reasoning before it stays free).
  std::shared_ptr<const CompiledFormat> format;
  std::vector<int32_t> format_after;
  // Called on the engine thread for every event (must be quick and must not block);
  // when unset, events queue up in the RequestHandle.
  std::function<void(const RequestEvent&)> on_event;
};

// submit() refuses a request at once: bad parameters or a request that can never fit
// (the server's 400), a full waiting queue (429), or an engine shutting down (503).
class RequestRejected : public Error {
 public:
  enum class Reason { Invalid, TooLong, QueueFull, Unavailable };  // 400, 400, 429, 503
  RequestRejected(Reason reason, const std::string& message) : Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// A thread-safe queue of one request's events.
class EventQueue {
 public:
  void push(RequestEvent event);
  // The next event, or nothing after `timeout`.
  std::optional<RequestEvent> pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestEvent> events_;
};

// Everything a request produced, put together (RequestHandle::wait).
struct RequestResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  FinishReason finish = FinishReason::Error;
  std::string error;
  std::string stop_string;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  int64_t events = 0;
};

class RequestHandle {
 public:
  RequestHandle(int64_t id, std::shared_ptr<EventQueue> queue) : id_(id), queue_(std::move(queue)) {}
  int64_t id() const { return id_; }
  // The next event (nothing after `timeout`). Only for requests without on_event.
  std::optional<RequestEvent> next(std::chrono::milliseconds timeout = std::chrono::hours(24));
  // Blocks until the request finishes and returns everything it produced.
  RequestResult wait();

 private:
  int64_t id_;
  std::shared_ptr<EventQueue> queue_;
};

// Folds one event into a result (what wait() does; servers with callbacks can use it too).
void accumulate(RequestResult& result, const RequestEvent& event);

}  // namespace corvid
