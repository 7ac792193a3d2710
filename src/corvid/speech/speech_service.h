// SpeechService: transcription for a server. Jobs (16-kHz audio and its options) come
// from any thread (the HTTP workers) into a bounded FIFO queue; one worker thread owns
// the Transcriber, which is not thread-safe, and runs them one at a time. Concurrent
// requests all complete, each after those before it: serialised on the one worker (a
// Whisper model's windows are not batched across requests yet).
//
// Callbacks run on the worker thread: each final segment as it is decoded (streamed
// answers), then exactly one of done (the transcript) or failed (a message). They must
// not block: they post to the requester's own thread (a connection strand).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "corvid/audio/audio_file.h"
#include "corvid/core/device_turns.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/transcriber.h"

namespace corvid {

struct SpeechJob {
  audio::Audio audio;  // at 16 kHz (audio::resample)
  TranscribeOptions options;
};

struct SpeechCallbacks {
  std::function<void(const TranscriptSegment&)> segment;  // may be empty
  std::function<void(Transcript)> done;
  std::function<void(const std::string& error)> failed;
};

struct SpeechServiceConfig {
  size_t max_waiting = 16;  // jobs queued (not counting the one running) before submit() refuses: 429
  // Set when another model shares the device (a text engine in the same server): each
  // window is decoded in a turn of it (core/device_turns.h). Outlives the service.
  DeviceTurns* device_turns = nullptr;
};

class SpeechService {
 public:
  // What the worker runs for a job; the service passes callbacks that report segments
  // and check for cancellation (a callback that throws ends the transcription); the
  // progress callback, between windows, is where the device changes hands.
  using Transcribe = std::function<Transcript(const SpeechJob&, const Transcriber::SegmentCallback&,
                                              const Transcriber::ProgressCallback&)>;

  // Transcribes with `model` (which outlives the service) through one Transcriber.
  explicit SpeechService(SpeechModel& model, SpeechServiceConfig config = {});
  // Runs jobs through `transcribe` (tests give a fake one).
  explicit SpeechService(Transcribe transcribe, SpeechServiceConfig config = {});
  ~SpeechService();
  SpeechService(const SpeechService&) = delete;
  SpeechService& operator=(const SpeechService&) = delete;

  // Queues `job`; returns its id for cancel(). Throws RequestRejected: QueueFull (429)
  // when max_waiting jobs wait, Unavailable (503) once shutdown() has begun.
  uint64_t submit(SpeechJob job, SpeechCallbacks callbacks);
  // The requester is gone: a waiting job is skipped, a running one stops after its
  // current window. Its failed callback still runs (once, on the worker). Unknown or
  // finished ids are ignored.
  void cancel(uint64_t id);
  size_t waiting() const;  // jobs queued behind the running one

  // Refuses new jobs, finishes those queued, and joins the worker (the destructor calls it).
  void shutdown();

 private:
  struct Entry {
    uint64_t id = 0;
    SpeechJob job;
    SpeechCallbacks callbacks;
    bool cancelled = false;
  };
  void run();
  void run_one(Entry& entry);

  Transcribe transcribe_;
  SpeechServiceConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;
  uint64_t next_id_ = 1;
  uint64_t running_ = 0;            // the running job's id (0: none)
  bool running_cancelled_ = false;  // cancel() came for it
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace corvid
