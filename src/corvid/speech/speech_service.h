// SpeechService: transcription for a server. Jobs (16-kHz audio and its options) come
// from any thread (the HTTP workers) into a bounded FIFO queue; `streams` worker
// threads take them in arrival order, each with its own Transcriber, so that up to
// `streams` transcriptions run at once. Their model work goes through one
// WhisperBatcher: the windows they encode and the decoder steps they take at the same
// time run as one encode and one step (speech/whisper_batcher.h). The model's KV pools
// must be sized for `streams` (SpeechModel::load's capacity).
//
// Callbacks run on the job's worker thread: each final segment as it is decoded (streamed
// answers), then exactly one of done (the transcript) or failed (a message). They must
// not block: they post to the requester's own thread (a connection strand).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "corvid/audio/audio_file.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/transcriber.h"
#include "corvid/speech/whisper_batcher.h"

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
  size_t max_waiting = 16;  // jobs queued (not counting those running) before submit() refuses: 429
  int streams = 1;          // transcriptions run at once (worker threads)
};

class SpeechService {
 public:
  // What worker `worker` (0 .. streams - 1) runs for a job; the service passes
  // callbacks that report segments and check for cancellation (a callback that throws
  // ends the transcription).
  using Transcribe = std::function<Transcript(int worker, const SpeechJob&, const Transcriber::SegmentCallback&,
                                              const Transcriber::ProgressCallback&)>;

  // Transcribes with `model` (which outlives the service): a Transcriber per worker,
  // over one WhisperBatcher. `device_turns`: set when another model shares the device
  // (a text engine in the same server); each merged step runs in a turn of it.
  explicit SpeechService(SpeechModel& model, SpeechServiceConfig config = {}, DeviceTurns* device_turns = nullptr);
  // Runs jobs through `transcribe` (tests give a fake one).
  explicit SpeechService(Transcribe transcribe, SpeechServiceConfig config = {});
  ~SpeechService();
  SpeechService(const SpeechService&) = delete;
  SpeechService& operator=(const SpeechService&) = delete;

  // Queues `job`; returns its id for cancel(). Throws RequestRejected: QueueFull (429)
  // when max_waiting jobs wait, Unavailable (503) once shutdown() has begun.
  uint64_t submit(SpeechJob job, SpeechCallbacks callbacks);
  // The requester is gone: a waiting job is skipped, a running one stops at its next
  // segment or window. Its failed callback still runs (once, on the worker). Unknown or
  // finished ids are ignored.
  void cancel(uint64_t id);
  size_t waiting() const;  // jobs queued behind those running

  // Refuses new jobs, finishes those queued, and joins the workers (the destructor calls it).
  void shutdown();

 private:
  struct Entry {
    uint64_t id = 0;
    SpeechJob job;
    SpeechCallbacks callbacks;
    bool cancelled = false;
  };
  void run(int worker);
  void run_one(int worker, Entry& entry);

  Transcribe transcribe_;
  SpeechServiceConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, bool> running_;  // the running jobs' ids: whether cancel() came for each
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // last: started once everything above exists
};

}  // namespace corvid
