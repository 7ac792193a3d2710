#include "corvid/speech/speech_service.h"

#include <exception>

#include "corvid/core/error.h"
#include "corvid/engine/request.h"

namespace corvid {

namespace {

// Thrown from the worker's callbacks to end a cancelled transcription; never escapes run_one.
struct Cancelled {};

// The model's workers: a Transcriber each, over one batcher (both live in the function,
// which the workers call, each with its own index).
SpeechService::Transcribe batched(SpeechModel& model, int streams, DeviceTurns* device_turns) {
  CORVID_CHECK(model.model->capacity().streams >= streams, "speech: the model's KV pools hold ",
               model.model->capacity().streams, " streams, not ", streams);
  WhisperBatcherConfig config;
  config.device_turns = device_turns;
  auto batcher = std::make_shared<WhisperBatcher>(*model.model, config);
  auto transcribers = std::make_shared<std::vector<std::unique_ptr<Transcriber>>>();
  for (int w = 0; w < streams; ++w) transcribers->push_back(std::make_unique<Transcriber>(model, *batcher));
  return [batcher, transcribers](int worker, const SpeechJob& job, const Transcriber::SegmentCallback& on_segment,
                                 const Transcriber::ProgressCallback& progress) {
    const WhisperBatcher::Stream stream(*batcher);
    return (*transcribers)[static_cast<size_t>(worker)]->transcribe(job.audio, job.options, on_segment, progress);
  };
}

}  // namespace

SpeechService::SpeechService(SpeechModel& model, SpeechServiceConfig config, DeviceTurns* device_turns)
    : SpeechService(batched(model, config.streams, device_turns), config) {}

SpeechService::SpeechService(Transcribe transcribe, SpeechServiceConfig config)
    : transcribe_(std::move(transcribe)), config_(config) {
  CORVID_CHECK(config_.streams >= 1, "speech: ", config_.streams, " streams");
  for (int w = 0; w < config_.streams; ++w) workers_.emplace_back([this, w] { run(w); });
}

SpeechService::~SpeechService() { shutdown(); }

void SpeechService::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

uint64_t SpeechService::submit(SpeechJob job, SpeechCallbacks callbacks) {
  using Reason = RequestRejected::Reason;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw RequestRejected(Reason::Unavailable, "the server is shutting down");
    if (queue_.size() >= config_.max_waiting)
      throw RequestRejected(Reason::QueueFull, std::to_string(queue_.size()) +
                                                   " transcriptions are waiting already; retry later");
    id = next_id_++;
    queue_.push_back(Entry{id, std::move(job), std::move(callbacks)});
  }
  wake_.notify_one();
  return id;
}

void SpeechService::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = running_.find(id); it != running_.end()) {
    it->second = true;
    return;
  }
  for (Entry& e : queue_)
    if (e.id == id) e.cancelled = true;
}

size_t SpeechService::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void SpeechService::run(int worker) {
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      entry = std::move(queue_.front());
      queue_.pop_front();
      running_[entry.id] = entry.cancelled;
    }
    run_one(worker, entry);
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(entry.id);
  }
}

void SpeechService::run_one(int worker, Entry& entry) {
  const SpeechCallbacks& cb = entry.callbacks;
  auto check = [this, id = entry.id] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_.at(id)) throw Cancelled{};
  };
  // Exceptions from the callbacks themselves are the requester's bugs; they must not
  // take the worker (and every later request) down.
  auto report_failure = [&cb](const std::string& message) {
    try {
      if (cb.failed) cb.failed(message);
    } catch (...) {
    }
  };
  Transcript transcript;
  try {
    check();
    const Transcriber::SegmentCallback on_segment = [&](const TranscriptSegment& s) {
      check();
      if (cb.segment) cb.segment(s);
    };
    const Transcriber::ProgressCallback progress = [&](double, double) { check(); };
    transcript = transcribe_(worker, entry.job, on_segment, progress);
  } catch (const Cancelled&) {
    return report_failure("the transcription was cancelled");
  } catch (const std::exception& e) {
    return report_failure(e.what());
  } catch (...) {
    return report_failure("the transcription failed");
  }
  try {
    if (cb.done) cb.done(std::move(transcript));
  } catch (...) {
  }
}

}  // namespace corvid
