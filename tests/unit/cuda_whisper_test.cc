// Whisper on the GPU: the tiny random checkpoint against transformers (encoder states,
// teacher-forced logits, greedy tokens) in both numerics, and the real tiny.en's
// transcript of a real clip against the CPU's (where models/whisper-tiny.en is fetched).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "binary_file_util.h"
#include "corvid/audio/audio_file.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/safetensors.h"
#include "corvid/models/whisper/whisper_model.h"
#include "corvid/speech/transcriber.h"
#include "cuda_test_util.h"
#include "fixture_util.h"
#include "whisper_greedy_step.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

fs::path tiny_dir() { return fixtures::source_dir() / "tests" / "data" / "whisper" / "tiny-random"; }

float worst(std::span<const float> a, std::span<const float> b) {
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Exact: fp32 GEMMs (measured: ...); Fast: 16-bit GEMM operands.
TEST(CudaWhisper, TinyRandomMatchesTransformers) {
  SKIP_WITHOUT_GPU();
  const WeightSet files = load_safetensors_checkpoint(tiny_dir().string());
  const WhisperConfig config = whisper_config_from_hf(read_json_file((tiny_dir() / "config.json").string()), "tiny");
  WeightLoader loader(files, WeightPlacement(Device::CUDA));
  WhisperModel model(config, loader);
  const auto features = fixtures::array_of<float>(tiny_dir() / "input_features.f32");
  const auto want_states = fixtures::array_of<float>(tiny_dir() / "encoder_out.f32");
  const auto want_logits = fixtures::array_of<float>(tiny_dir() / "decoder_logits.f32");
  const auto want_greedy = fixtures::array_of<int32_t>(tiny_dir() / "greedy_tokens.i32");
  for (const ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
    testing::NumericsScope scope(mode);
    const bool exact = mode == ops::QuantizedMatmul::Exact;
    auto audio = model.encode(features, 1, true);
    const std::vector<float> states = testing::to_host(audio->states.tensor);
    const float states_err = worst(states, want_states);
    EXPECT_LT(states_err, exact ? 2e-4f : 3e-2f) << (exact ? "exact" : "fast");
    auto seq = model.start(audio, 0);
    WhisperSequence* seqs[] = {seq.get()};
    const std::vector<std::vector<int32_t>> tokens = {{500, 17, 42, 99, 3, 250, 7, 480}};
    const int64_t rows[] = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float> logits;
    model.decode(seqs, tokens, rows, logits);
    const float logits_err = worst(logits, want_logits);
    EXPECT_LT(logits_err, exact ? 5e-4f : 5e-2f) << (exact ? "exact" : "fast");
    auto g = model.start(audio, 0);
    WhisperSequence* gs[] = {g.get()};
    int32_t token = 500;
    size_t agree = 0;
    const int64_t last[] = {0};
    for (size_t i = 0; i < want_greedy.size(); ++i) {
      const std::vector<std::vector<int32_t>> step = {{token}};
      model.decode(gs, step, last, logits);
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (token != want_greedy[i]) break;
      ++agree;
    }
    if (exact) {
      EXPECT_EQ(agree, want_greedy.size());
    }
    std::printf("whisper tiny-random %s: states %.3g, logits %.3g, greedy %zu/%zu equal\n", exact ? "exact" : "fast",
                states_err, logits_err, agree, want_greedy.size());
  }
}

// Decoder steps replayed from recordings (CUDA graphs) against the same steps op by op:
// three hypotheses (one forked mid-way, so copy on write runs before a replay), then
// two after one is dropped (a second recording), over enough steps to cross several
// self-attention blocks. The recorded steps read full-width block tables, so the
// attention's splits may differ from the op-by-op step's: equal within fp32 rounding.
TEST(CudaWhisper, RecordedStepsMatchOpByOp) {
  SKIP_WITHOUT_GPU();
  const WeightSet files = load_safetensors_checkpoint(tiny_dir().string());
  const WhisperConfig config = whisper_config_from_hf(read_json_file((tiny_dir() / "config.json").string()), "tiny");
  WeightLoader loader(files, WeightPlacement(Device::CUDA));
  WhisperModel model(config, loader, WhisperCapacity{1, 3, 1});
  const auto features = fixtures::array_of<float>(tiny_dir() / "input_features.f32");
  testing::NumericsScope scope(ops::QuantizedMatmul::Exact);
  auto run = [&](bool record, std::vector<int32_t>& tokens_out) {
    model.set_step_recording(record);
    auto audio = model.encode(features, 1);
    std::vector<std::unique_ptr<WhisperSequence>> hyps;
    hyps.push_back(model.start(audio, 0));
    hyps.push_back(model.start(audio, 0));
    std::vector<float> trace;
    std::vector<int32_t> next = {500, 501};
    const int64_t V = config.vocab_size;
    for (int step = 0; step < 70; ++step) {
      if (step == 20) {  // fork hypothesis 0: the next write into its last block copies it
        hyps.push_back(model.start(audio, 0));
        model.copy(*hyps[0], *hyps[2]);
        next.push_back((next[0] + 1) % static_cast<int32_t>(V));
      }
      if (step == 45) {  // drop hypothesis 1: steps of two from here
        hyps.erase(hyps.begin() + 1);
        next.erase(next.begin() + 1);
      }
      fixtures::greedy_step(model, hyps, next, trace);
      tokens_out.insert(tokens_out.end(), next.begin(), next.end());
    }
    return trace;
  };
  std::vector<int32_t> eager_tokens, recorded_tokens;
  const std::vector<float> eager = run(false, eager_tokens);
  const uint64_t before = model.replayed_steps();
  const std::vector<float> recorded = run(true, recorded_tokens);
  EXPECT_GT(model.replayed_steps() - before, 60u) << "the steps ran from recordings";
  EXPECT_EQ(recorded_tokens, eager_tokens);
  ASSERT_EQ(recorded.size(), eager.size());
  const float err = worst(recorded, eager);
  EXPECT_LT(err, 1e-4f);
  std::printf("whisper recorded steps: %llu replayed, logits within %.3g of op by op\n",
              static_cast<unsigned long long>(model.replayed_steps() - before), err);
}

// The real tiny.en on the CPU and on the GPU, and a real clip (where models/whisper-tiny.en
// is fetched).
class CudaWhisperTinyEn : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    const fs::path dir = fixtures::source_dir() / "models" / "whisper-tiny.en";
    if (!fs::exists(dir / "model.bin")) GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model whisper-tiny.en";
    clip_ = audio::read_file((fixtures::source_dir() / "tests" / "data" / "audio" / "speech_16k.wav").string());
    cpu_ = SpeechModel::load(dir.string(), Device::CPU);
    gpu_ = SpeechModel::load(dir.string(), Device::CUDA);
  }
  audio::Audio clip_;
  std::unique_ptr<SpeechModel> cpu_, gpu_;
};

// The GPU's greedy transcript (tokens) equals the CPU's.
TEST_F(CudaWhisperTinyEn, TranscribesAsTheCpuDoes) {
  TranscribeOptions o;
  o.beam_size = 1;
  const Transcript want = Transcriber(*cpu_).transcribe(clip_, o);
  for (const ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
    testing::NumericsScope scope(mode);
    const Transcript got = Transcriber(*gpu_).transcribe(clip_, o);
    std::printf("tiny.en on cuda (%s): %s\n", mode == ops::QuantizedMatmul::Exact ? "exact" : "fast", got.text().c_str());
    ASSERT_EQ(got.segments.size(), want.segments.size());
    for (size_t i = 0; i < want.segments.size(); ++i) EXPECT_EQ(got.segments[i].tokens, want.segments[i].tokens);
  }
}

// Word timing on the GPU: the same words as on the CPU, each within one encoder position
// (20 ms: the GPU's attention scores differ in the last bits, which may move a DTW step).
TEST_F(CudaWhisperTinyEn, TimesWordsAsTheCpuDoes) {
  TranscribeOptions o;
  o.beam_size = 1;
  o.word_timestamps = true;
  const Transcript want = Transcriber(*cpu_).transcribe(clip_, o);
  const Transcript got = Transcriber(*gpu_).transcribe(clip_, o);
  ASSERT_EQ(got.segments.size(), want.segments.size());
  size_t words = 0;
  for (size_t i = 0; i < want.segments.size(); ++i) {
    ASSERT_EQ(got.segments[i].words.size(), want.segments[i].words.size());
    for (size_t j = 0; j < want.segments[i].words.size(); ++j, ++words) {
      const TimedWord &a = got.segments[i].words[j], &b = want.segments[i].words[j];
      EXPECT_EQ(a.word, b.word);
      EXPECT_NEAR(a.start, b.start, 0.0201) << a.word;
      EXPECT_NEAR(a.end, b.end, 0.0201) << a.word;
      EXPECT_NEAR(a.probability, b.probability, 2e-3) << a.word;
    }
  }
  EXPECT_GT(words, 5u);
}

}  // namespace
}  // namespace corvid
