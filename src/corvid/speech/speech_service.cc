#include "corvid/speech/speech_service.h"

#include <exception>

#include "corvid/engine/request.h"

namespace corvid {

namespace {

// Thrown from the worker's callbacks to end a cancelled transcription; never escapes run_one.
struct Cancelled {};

// The device turn a transcription holds, given up between windows.
class HeldTurn {
 public:
  explicit HeldTurn(DeviceTurns* turns) : turns_(turns) {}
  ~HeldTurn() { give(); }
  HeldTurn(const HeldTurn&) = delete;
  HeldTurn& operator=(const HeldTurn&) = delete;
  void take() {
    if (turns_ && !held_) turns_->acquire();
    held_ = true;
  }
  void give() {
    if (turns_ && held_) turns_->release();
    held_ = false;
  }

 private:
  DeviceTurns* turns_;
  bool held_ = false;
};

}  // namespace

SpeechService::SpeechService(SpeechModel& model, SpeechServiceConfig config)
    : SpeechService(
          // The Transcriber lives in the function, which only the worker thread calls.
          [transcriber = std::make_shared<Transcriber>(model)](const SpeechJob& job,
                                                               const Transcriber::SegmentCallback& on_segment,
                                                               const Transcriber::ProgressCallback& progress) {
            return transcriber->transcribe(job.audio, job.options, on_segment, progress);
          },
          config) {}

SpeechService::SpeechService(Transcribe transcribe, SpeechServiceConfig config)
    : transcribe_(std::move(transcribe)), config_(config), thread_([this] { run(); }) {}

SpeechService::~SpeechService() { shutdown(); }

void SpeechService::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
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
  if (id == running_) {
    running_cancelled_ = true;
    return;
  }
  for (Entry& e : queue_)
    if (e.id == id) e.cancelled = true;
}

size_t SpeechService::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void SpeechService::run() {
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      entry = std::move(queue_.front());
      queue_.pop_front();
      running_ = entry.id;
      running_cancelled_ = entry.cancelled;
    }
    run_one(entry);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = 0;
  }
}

void SpeechService::run_one(Entry& entry) {
  const SpeechCallbacks& cb = entry.callbacks;
  auto check = [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_cancelled_) throw Cancelled{};
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
    HeldTurn turn(config_.device_turns);
    turn.take();
    const Transcriber::SegmentCallback on_segment = [&](const TranscriptSegment& s) {
      check();
      if (cb.segment) cb.segment(s);
    };
    // After each window: the other model may run a step before the next one.
    const Transcriber::ProgressCallback progress = [&](double, double) {
      turn.give();
      check();
      turn.take();
    };
    transcript = transcribe_(entry.job, on_segment, progress);
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
