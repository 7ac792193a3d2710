// WhisperBatcher: concurrent transcriptions share one Whisper model's steps. Each
// transcription runs on its own thread (a SpeechService worker) and calls the batcher
// as it would call the model; one executor thread collects the calls and runs them
// merged: every waiting decode as one decoder step over all their hypotheses, every
// waiting encode as one encoder pass over all their windows (encode_parts). A caller
// blocks until its part is done, and gets exactly what the model alone would give it
// (on the CPU, bit for bit: every row of a step is computed on its own).
//
// When does a step run? As soon as every stream (a transcription in progress, marked
// by holding a Stream) has a call waiting, or `gather` after the first call came,
// whichever is first: a stream busy with host work (log-mel, word timing) delays the
// others by at most that. A caller outside any Stream never makes a step wait.
//
// A call the model refuses (its checks, a spent pool) fails alone: a merged step that
// fails is run again call by call, so that only the faulty one gets the error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "corvid/core/device_turns.h"
#include "corvid/models/whisper/whisper_model.h"

namespace corvid {

struct WhisperBatcherConfig {
  // Set when another model shares the device (a text engine in the same server): each
  // merged step runs in a turn of it (core/device_turns.h). Outlives the batcher.
  DeviceTurns* device_turns = nullptr;
  std::chrono::microseconds gather{2000};
};

class WhisperBatcher final : public WhisperSteps {
 public:
  // `model` outlives the batcher; no one else drives it while the batcher exists.
  explicit WhisperBatcher(WhisperModel& model, WhisperBatcherConfig config = {});
  // Runs what is queued, then joins the executor; every caller must have returned.
  ~WhisperBatcher() override;
  WhisperBatcher(const WhisperBatcher&) = delete;
  WhisperBatcher& operator=(const WhisperBatcher&) = delete;

  // A transcription in progress on the calling thread: steps wait (up to `gather`) for
  // its next call.
  class Stream {
   public:
    explicit Stream(WhisperBatcher& batcher);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

   private:
    WhisperBatcher& batcher_;
  };

  const WhisperConfig& config() const override { return model_.config(); }
  const WhisperCapacity& capacity() const override { return model_.capacity(); }
  // On a GPU, run by the executor alone (the device serves one thread); on the CPU, on
  // the caller's thread.
  std::vector<float> spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames) override;
  std::shared_ptr<EncodedAudio> encode(std::span<const float> features, int64_t windows,
                                       bool keep_states = false) override;
  std::unique_ptr<WhisperSequence> start(std::shared_ptr<const EncodedAudio> audio, int64_t window) const override {
    return model_.start(std::move(audio), window);
  }
  void copy(const WhisperSequence& from, WhisperSequence& to) const override { model_.copy(from, to); }
  void decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
              std::span<const int64_t> want, std::vector<float>& logits) override;
  std::vector<float> cross_attention(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                     const std::vector<int32_t>& tokens, std::span<const std::pair<int, int>> heads,
                                     int64_t frames, std::vector<float>& logits) override;

  // How much merging happened: calls made, and the model runs that served them.
  struct Stats {
    uint64_t decode_calls = 0, decode_steps = 0;
    uint64_t encode_calls = 0, encode_runs = 0;
  };
  Stats stats() const;

 private:
  struct Call {
    enum class Kind { Encode, Decode, Other } kind = Kind::Other;
    // Encode
    std::span<const float> features;
    int64_t windows = 0;
    bool keep_states = false;
    std::shared_ptr<EncodedAudio> encoded;
    // Decode
    std::span<WhisperSequence* const> seqs;
    std::span<const std::vector<int32_t>> tokens;
    std::span<const int64_t> want;
    std::vector<float>* logits = nullptr;
    // Other: run as it is, alone
    std::function<void()> work;

    bool done = false;
    std::exception_ptr error;
  };
  // Queues `call` and blocks until the executor has run it; rethrows its error.
  void submit(Call& call);
  void run();
  void run_batch(const std::vector<Call*>& batch);
  void run_encodes(const std::vector<Call*>& calls);
  void run_decodes(const std::vector<Call*>& calls);
  // Runs `work` for `call` alone, keeping its error for the caller; counts a model run
  // in `runs` (a Stats field) unless null.
  void run_alone(Call& call, const std::function<void()>& work, uint64_t Stats::*runs);
  void count(uint64_t Stats::*field, uint64_t n = 1);  // stats_.*field += n, under the lock

  WhisperModel& model_;
  WhisperBatcherConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the executor: a call came, a stream ended, stop
  std::condition_variable done_;  // callers: their call ran
  std::deque<Call*> queue_;
  std::chrono::steady_clock::time_point oldest_;  // when the first queued call came
  int64_t streams_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::thread executor_;  // last: started once everything above exists
};

}  // namespace corvid
