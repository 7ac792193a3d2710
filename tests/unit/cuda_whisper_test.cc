// Whisper on the GPU: the tiny random checkpoint against transformers (encoder states,
// teacher-forced logits, greedy tokens) in both numerics and both KV types, recorded
// steps against op by op, and the real tiny.en's and base's transcripts of a real clip
// against the CPU's (where scripts/fetch-model.sh fetched them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

// Exact: fp32 GEMMs; Fast: 16-bit GEMM operands. Each with F32 and F16 KV pools (F16,
// the GPU's default, rounds the keys and values to 11 bits: the logits move by ~1e-3).
TEST(CudaWhisper, TinyRandomMatchesTransformers) {
  SKIP_WITHOUT_GPU();
  const WeightSet files = load_safetensors_checkpoint(tiny_dir().string());
  const WhisperConfig config = whisper_config_from_hf(read_json_file((tiny_dir() / "config.json").string()), "tiny");
  const auto features = fixtures::array_of<float>(tiny_dir() / "input_features.f32");
  const auto want_states = fixtures::array_of<float>(tiny_dir() / "encoder_out.f32");
  const auto want_logits = fixtures::array_of<float>(tiny_dir() / "decoder_logits.f32");
  const auto want_greedy = fixtures::array_of<int32_t>(tiny_dir() / "greedy_tokens.i32");
  for (const DType kv : {DType::F32, DType::F16}) {
    WeightLoader loader(files, WeightPlacement(Device::CUDA));
    WhisperCapacity capacity;
    capacity.kv_dtype = kv;
    WhisperModel model(config, loader, capacity);
    ASSERT_EQ(model.pool().kv_dtype(), kv);
    const bool f32_kv = kv == DType::F32;
    for (const ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
      testing::NumericsScope scope(mode);
      const bool exact = mode == ops::QuantizedMatmul::Exact;
      const std::string what = std::string(exact ? "exact" : "fast") + (f32_kv ? ", f32 kv" : ", f16 kv");
      auto audio = model.encode(features, 1, true);
      const std::vector<float> states = testing::to_host(audio->states.tensor);
      const float states_err = worst(states, want_states);
      EXPECT_LT(states_err, exact ? 2e-4f : 3e-2f) << what;
      auto seq = model.start(audio, 0);
      WhisperSequence* seqs[] = {seq.get()};
      const std::vector<std::vector<int32_t>> tokens = {{500, 17, 42, 99, 3, 250, 7, 480}};
      const int64_t rows[] = {0, 1, 2, 3, 4, 5, 6, 7};
      std::vector<float> logits;
      model.decode(seqs, tokens, rows, logits);
      const float logits_err = worst(logits, want_logits);
      EXPECT_LT(logits_err, exact ? (f32_kv ? 5e-4f : 1e-2f) : 5e-2f) << what;
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
      if (exact && f32_kv) {
        EXPECT_EQ(agree, want_greedy.size());
      }
      std::printf("whisper tiny-random %s: states %.3g, logits %.3g, greedy %zu/%zu equal\n", what.c_str(),
                  states_err, logits_err, agree, want_greedy.size());
    }
  }
}

// Decoder steps replayed from recordings (CUDA graphs) against the same steps op by op:
// three hypotheses (one forked mid-way, so copy on write runs before a replay), then
// two after one is dropped (a second recording), over enough steps to cross several
// self-attention blocks. The recorded steps read full-width block tables, so the
// attention's splits may differ from the op-by-op step's: equal within fp32 rounding.
class CudaWhisperKv : public ::testing::TestWithParam<DType> {};

TEST_P(CudaWhisperKv, RecordedStepsMatchOpByOp) {
  SKIP_WITHOUT_GPU();
  const WeightSet files = load_safetensors_checkpoint(tiny_dir().string());
  const WhisperConfig config = whisper_config_from_hf(read_json_file((tiny_dir() / "config.json").string()), "tiny");
  WeightLoader loader(files, WeightPlacement(Device::CUDA));
  WhisperModel model(config, loader, WhisperCapacity{1, 3, 1, GetParam()});
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
  std::printf("whisper recorded steps (%s kv): %llu replayed, logits within %.3g of op by op\n",
              std::string(dtype_name(GetParam())).c_str(),
              static_cast<unsigned long long>(model.replayed_steps() - before), err);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, CudaWhisperKv, ::testing::Values(DType::F32, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// The real tiny.en and base on the CPU and on the GPU (F32 and F16 KV), over a real clip
// (where scripts/fetch-model.sh has fetched them).
struct RealModel {
  const char* name;
  DType kv;
};

class CudaWhisperReal : public ::testing::TestWithParam<RealModel> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    const fs::path dir = fixtures::source_dir() / "models" / GetParam().name;
    if (!fs::exists(dir / "model.bin"))
      GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model " << GetParam().name;
    clip_ = audio::read_file((fixtures::source_dir() / "tests" / "data" / "audio" / "speech_16k.wav").string());
    cpu_ = SpeechModel::load(dir.string(), Device::CPU);
    WhisperCapacity capacity;
    capacity.kv_dtype = GetParam().kv;
    gpu_ = SpeechModel::load(dir.string(), Device::CUDA, capacity);
  }
  audio::Audio clip_;
  std::unique_ptr<SpeechModel> cpu_, gpu_;
};

// The GPU's greedy transcript equals the CPU's: the same text tokens, and timestamps
// within 0.2 s. A timestamp inside a pause is a near-tie the GPU's rounding can break
// the other way: base ends "…the lazy dog." at <|2.96|> on the GPU and <|3.16|> on the
// CPU (the pause runs from 2.8 to 3.2 s), with every text token the same.
TEST_P(CudaWhisperReal, TranscribesAsTheCpuDoes) {
  TranscribeOptions o;
  o.beam_size = 1;
  const int32_t ts = gpu_->vocab.timestamp_begin;
  auto split = [ts](const std::vector<int32_t>& tokens, std::vector<int32_t>& text, std::vector<int32_t>& times) {
    for (int32_t t : tokens) (t >= ts ? times : text).push_back(t);
  };
  const Transcript want = Transcriber(*cpu_).transcribe(clip_, o);
  for (const ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
    testing::NumericsScope scope(mode);
    const Transcript got = Transcriber(*gpu_).transcribe(clip_, o);
    std::printf("%s on cuda (%s, %s kv): %s\n", GetParam().name, mode == ops::QuantizedMatmul::Exact ? "exact" : "fast",
                std::string(dtype_name(GetParam().kv)).c_str(), got.text().c_str());
    EXPECT_EQ(got.language, want.language);
    EXPECT_EQ(got.text(), want.text());
    ASSERT_EQ(got.segments.size(), want.segments.size());
    for (size_t i = 0; i < want.segments.size(); ++i) {
      std::vector<int32_t> got_text, got_times, want_text, want_times;
      split(got.segments[i].tokens, got_text, got_times);
      split(want.segments[i].tokens, want_text, want_times);
      EXPECT_EQ(got_text, want_text) << "segment " << i;
      ASSERT_EQ(got_times.size(), want_times.size()) << "segment " << i;
      for (size_t j = 0; j < want_times.size(); ++j)
        EXPECT_LE(std::abs(got_times[j] - want_times[j]), 10) << "segment " << i << ": timestamps 20 ms apart";
    }
  }
}

// Word timing on the GPU: the same words as on the CPU, each within one encoder position
// (20 ms: the GPU's attention scores differ in the last bits, which may move a DTW step),
// and their probabilities within 0.015 (measured on an H100: up to 0.0085 apart, the
// 16-bit GEMM operands' rounding through the softmax).
TEST_P(CudaWhisperReal, TimesWordsAsTheCpuDoes) {
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
      EXPECT_NEAR(a.probability, b.probability, 1.5e-2) << a.word;
    }
  }
  EXPECT_GT(words, 5u);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaWhisperReal,
                         ::testing::Values(RealModel{"whisper-tiny.en", DType::F32}, RealModel{"whisper-tiny.en", DType::F16},
                                           RealModel{"whisper-base", DType::F32}, RealModel{"whisper-base", DType::F16}),
                         [](const ::testing::TestParamInfo<RealModel>& p) {
                           std::string n = std::string(p.param.name).substr(8) + "_" + std::string(dtype_name(p.param.kv));
                           for (char& ch : n) if (ch == '.' || ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace corvid
