#include "corvid/engine/request.h"

namespace corvid {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

void EventQueue::push(RequestEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

std::optional<RequestEvent> EventQueue::pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  RequestEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::optional<RequestEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  CORVID_CHECK(queue_, "request ", id_, ": events go to its on_event callback, not to the handle");
  return queue_->pop(timeout);
}

void accumulate(RequestResult& result, const RequestEvent& event) {
  ++result.events;
  result.text += event.text;
  result.token_ids.insert(result.token_ids.end(), event.token_ids.begin(), event.token_ids.end());
  result.logprobs.insert(result.logprobs.end(), event.logprobs.begin(), event.logprobs.end());
  result.top_logprobs.insert(result.top_logprobs.end(), event.top_logprobs.begin(), event.top_logprobs.end());
  if (event.finish) {
    result.finish = *event.finish;
    result.error = event.error;
    result.stop_string = event.stop_string;
    result.prompt_tokens = event.prompt_tokens;
    result.completion_tokens = event.completion_tokens;
    result.cached_tokens = event.cached_tokens;
  }
}

RequestResult RequestHandle::wait() {
  RequestResult result;
  while (true) {
    std::optional<RequestEvent> event = next();
    if (!event) continue;
    accumulate(result, *event);
    if (event->finish) return result;
  }
}

}  // namespace corvid
