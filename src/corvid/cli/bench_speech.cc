// corvid bench on a Whisper model: the two costs a transcription is made of, measured
// apart. The encoder, once per 30-s window (--windows of them in one batch), and the
// decoder step, --beams hypotheses of one window per step (beam search and best-of run
// that many), over -n steps after the 4-token start-of-transcript prompt. A window of
// speech is about 100 tokens (150 words a minute), so the estimated real-time factor of
// greedy decoding is (front end + encode + 100 steps) / 30 s, the front end being the
// log-mel spectrogram of 30 s of samples (cuFFT on a GPU).
// --streams S measures what the server's batcher runs for S concurrent transcriptions:
// S windows (one per stream) in one encoder pass, and steps over S x beams hypotheses,
// each stream's over its own window; the estimate is then
// (S x (front end + encode) + 100 steps) / (S x 30 s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "corvid/audio/log_mel.h"
#include "corvid/cli/bench_speech.h"
#include "corvid/cli/common.h"
#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/speech/speech_model.h"

namespace corvid::cli {

void run_speech_bench(const SpeechBenchArgs& a) {
  const Device device = parse_device(a.device);
  CORVID_CHECK(a.windows >= 1 && a.beams >= 1 && a.streams >= 1,
               "bench: --windows, --beams and --streams must be at least 1");
  const int streams = a.streams, windows = streams > 1 ? streams : a.windows;
  const int hyps = streams * a.beams;
  WhisperCapacity capacity{streams, a.beams, streams > 1 ? 1 : a.windows, {}};
  if (a.kv_cache_dtype != "auto") {
    const KvFormat f = kv_format_named(a.kv_cache_dtype);
    CORVID_CHECK(f.keys == f.values && !f.rotated(), "bench: Whisper's cache takes one plain --kv-cache-dtype, not ",
                 a.kv_cache_dtype);
    capacity.kv_dtype = f.keys;
  }
  std::unique_ptr<SpeechModel> sm =
      a.dummy_shape.empty() ? SpeechModel::load(a.model, device, capacity)
                            : SpeechModel::dummy(whisper_shape(a.dummy_shape), a.model, device, capacity);
  WhisperModel& model = *sm->model;
  model.set_step_recording(!a.eager);
  const WhisperConfig& c = model.config();
  CORVID_CHECK(a.gen + 4 <= c.text_positions, "bench: -n ", a.gen, " steps do not fit the decoder's ",
               c.text_positions, " positions");
  std::mt19937 rng(1234);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::vector<float> features(static_cast<size_t>(windows * c.n_mels * c.input_frames()));
  for (float& f : features) f = noise(rng);  // log-mel values are around [-1, 1.5]
  std::vector<float> samples(static_cast<size_t>(audio::LogMel::kWindowSamples));
  for (float& x : samples) x = 0.1f * noise(rng);
  const std::vector<int32_t> prompt = {sm->vocab.sot, sm->vocab.sot, sm->vocab.sot, sm->vocab.sot};
  const std::vector<int32_t> one = {sm->vocab.timestamp_begin};
  // The encoder pass: one part per stream, or one of --windows windows.
  const std::vector<int64_t> parts = streams > 1 ? std::vector<int64_t>(static_cast<size_t>(streams), 1)
                                                 : std::vector<int64_t>{windows};

  using clock = std::chrono::steady_clock;
  std::vector<double> front_ms, encode_ms, step_ms;
  std::vector<float> logits;
  for (int r = 0; r <= a.reps; ++r) {  // rep 0 warms up
    auto t0 = clock::now();
    int64_t frames = 0;
    model.spectrogram(samples, audio::LogMel::kHop, &frames);  // returns on the host: synchronous
    const double front = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    t0 = clock::now();
    const std::vector<std::shared_ptr<EncodedAudio>> audio = model.encode_parts(features, parts);
    synchronize(device);
    const double enc = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    std::vector<std::unique_ptr<WhisperSequence>> seqs;
    std::vector<WhisperSequence*> ptrs;
    for (int h = 0; h < hyps; ++h) {
      seqs.push_back(model.start(audio[static_cast<size_t>(h / a.beams)], 0));
      ptrs.push_back(seqs.back().get());
    }
    std::vector<int64_t> want(static_cast<size_t>(hyps));
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(hyps), prompt);
    for (int h = 0; h < hyps; ++h) want[static_cast<size_t>(h)] = static_cast<int64_t>((h + 1) * prompt.size()) - 1;
    model.decode(ptrs, tokens, want, logits);
    std::fill(tokens.begin(), tokens.end(), one);
    for (int h = 0; h < hyps; ++h) want[static_cast<size_t>(h)] = h;
    t0 = clock::now();
    for (int64_t i = 0; i < a.gen; ++i) model.decode(ptrs, tokens, want, logits);  // logits to the host: synchronous
    const double steps = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (r) {
      front_ms.push_back(front);
      encode_ms.push_back(enc / static_cast<double>(windows));
      step_ms.push_back(steps / static_cast<double>(std::max<int64_t>(a.gen, 1)));
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  const double front = mean(front_ms), enc = mean(encode_ms), step = mean(step_ms);
  std::printf("model: %s (whisper %s, %.1fM params), device: %s, threads: %d\n", sm->path.c_str(),
              a.dummy_shape.empty() ? "checkpoint" : a.dummy_shape.c_str(),
              static_cast<double>(model.parameter_count()) / 1e6, device_backend(device).description().c_str(),
              ThreadPool::global().size());
  std::printf("front end: %.2f ms per 30 s of samples (log-mel on the %s)\n", front,
              device == Device::CPU ? "CPU" : "GPU: cuFFT");
  std::printf("encode: %.2f ms per 30-s window (%d in a batch)\n", enc, windows);
  std::printf("decode: %.3f ms per step of %d hypotheses, %lld steps (%.0f tokens/s; %s; %s KV)\n", step, hyps,
              static_cast<long long>(a.gen), 1000.0 * hyps / step,
              model.replayed_steps() > 0 ? "replayed from a recording" : "op by op",
              std::string(dtype_name(model.pool().kv_dtype())).c_str());
  if (streams == 1) {
    std::printf("rtf: %.4f (one window: front end + encode + 100 steps, over 30 s)\n",
                (front + enc + 100 * step) / 30000.0);
  } else {
    const double rtf = ((front + enc) * streams + 100 * step) / (30000.0 * streams);
    std::printf("rtf: %.5f = %.0fx real time (%d streams, a window each: front end + encode + 100 steps, over %d x 30 s)\n", rtf,
                1.0 / rtf, streams, streams);
  }
}

}  // namespace corvid::cli
