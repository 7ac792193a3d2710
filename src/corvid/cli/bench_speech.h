// corvid bench's Whisper half (bench_speech.cc): encoder and decoder-step times.
#pragma once

#include <cstdint>
#include <string>

namespace corvid::cli {

struct SpeechBenchArgs {
  std::string model;        // a Whisper folder (with --dummy-shape: only its tokenizer is read)
  std::string device = "auto";
  std::string dummy_shape;  // tiny … large-v3: made-up weights of that shape
  int64_t gen = 128;        // decoder steps timed
  int reps = 3;
  int windows = 1;          // 30-s windows encoded in one batch
  int beams = 1;            // hypotheses per decoder step (per stream)
  int streams = 1;          // > 1: that many transcriptions batched, a window each (--windows is ignored)
  bool eager = false;       // decoder steps op by op, not replayed from recordings
  std::string kv_cache_dtype = "auto";  // f32 | f16; auto: WhisperKvPool::default_kv_dtype
};

void run_speech_bench(const SpeechBenchArgs& args);

}  // namespace corvid::cli
