// Whisper's encoder-decoder against transformers on the tiny random checkpoint
// (tests/data/whisper/tiny-random, made by tests/oracle/make_whisper_oracle.py):
// encoder states, teacher-forced decoder logits, greedy tokens through the cache,
// and the same answers whatever a step batches together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/whisper/whisper_model.h"
#include "whisper_tiny_fixture.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() { return fixtures::tiny_whisper_dir(); }

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

class WhisperTiny : public ::testing::Test {
 protected:
  fixtures::TinyWhisper tiny_{WhisperCapacity{2, 5, 2, {}}};
  const WhisperConfig& config_ = tiny_.config;
  WhisperModel* model_ = tiny_.model.get();
  const std::vector<float>& features_ = tiny_.features;
};

TEST_F(WhisperTiny, ConfigReadsTheCheckpoint) {
  EXPECT_EQ(config_.d_model, 64);
  EXPECT_EQ(config_.encoder_layers, 2);
  EXPECT_EQ(config_.decoder_heads, 4);
  EXPECT_EQ(config_.vocab_size, 512);
  EXPECT_EQ(config_.input_frames(), 3000);
}

// transformers' encoder output within 1e-4 (values up to 4.4), on the whole clip and on
// a short one padded with silence.
TEST_F(WhisperTiny, EncoderMatchesTransformers) {
  for (const char* name : {"", "_short"}) {
    const auto features = fixtures::array_of<float>(fixture_dir() / (std::string("input_features") + name + ".f32"));
    const auto want = fixtures::array_of<float>(fixture_dir() / (std::string("encoder_out") + name + ".f32"));
    auto audio = model_->encode(features, 1, /*keep_states=*/true);
    std::vector<float> got(want.size());
    ASSERT_EQ(audio->states.tensor.numel(), static_cast<int64_t>(want.size()));
    std::copy_n(audio->states.tensor.ptr<float>(), got.size(), got.begin());
    EXPECT_LT(max_abs_diff(got, want), 1e-4f) << name;
  }
}

// Two windows encoded together give each window's own states.
TEST_F(WhisperTiny, EncoderWindowsAreIndependent) {
  auto one = model_->encode(features_, 1, true);
  std::vector<float> two_in = fixtures::array_of<float>(fixture_dir() / "input_features_short.f32");
  two_in.insert(two_in.end(), features_.begin(), features_.end());
  auto two = model_->encode(two_in, 2, true);
  const int64_t rows = 1500 * 64;
  std::span<const float> second(two->states.tensor.ptr<float>() + rows, static_cast<size_t>(rows));
  std::span<const float> alone(one->states.tensor.ptr<float>(), static_cast<size_t>(rows));
  EXPECT_EQ(max_abs_diff(second, alone), 0.0f);
}

// One teacher-forced step over 8 tokens, and the same tokens one step at a time through
// the cache: both within 2e-4 of transformers' logits (values up to 2.9).
TEST_F(WhisperTiny, DecoderLogitsMatchTransformers) {
  const std::vector<int32_t> tokens = {500, 17, 42, 99, 3, 250, 7, 480};
  const auto want = fixtures::array_of<float>(fixture_dir() / "decoder_logits.f32");
  auto audio = model_->encode(features_, 1);
  auto seq = model_->start(audio, 0);
  WhisperSequence* seqs[] = {seq.get()};
  std::vector<std::vector<int32_t>> step = {tokens};
  std::vector<int64_t> rows(8);
  for (int64_t i = 0; i < 8; ++i) rows[static_cast<size_t>(i)] = i;
  std::vector<float> logits;
  model_->decode(seqs, step, rows, logits);
  EXPECT_LT(max_abs_diff(logits, want), 2e-4f);
  EXPECT_EQ(seq->length, 8);

  auto cached = model_->start(audio, 0);
  WhisperSequence* one[] = {cached.get()};
  std::vector<float> all, row;
  const int64_t last[] = {0};
  for (int32_t t : tokens) {
    std::vector<std::vector<int32_t>> s = {{t}};
    model_->decode(one, s, last, row);
    all.insert(all.end(), row.begin(), row.end());
  }
  EXPECT_LT(max_abs_diff(all, want), 2e-4f);
}

// Plain greedy decoding from [500] for 40 steps gives transformers' tokens (the smallest
// top-1/top-2 gap on the way is 0.011, far above the logits' error).
TEST_F(WhisperTiny, GreedyTokensMatchTransformers) {
  const auto want = fixtures::array_of<int32_t>(fixture_dir() / "greedy_tokens.i32");
  ASSERT_EQ(want.size(), 40u);
  auto audio = model_->encode(features_, 1);
  auto seq = model_->start(audio, 0);
  WhisperSequence* seqs[] = {seq.get()};
  std::vector<float> logits;
  const int64_t last[] = {0};
  int32_t token = 500;
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<std::vector<int32_t>> s = {{token}};
    model_->decode(seqs, s, last, logits);
    token = argmax(logits);
    ASSERT_EQ(token, want[i]) << "step " << i;
  }
}

// Hypotheses of different lengths over different windows, decoded in one step, give
// the logits each gets alone (bit for bit on the CPU); a copied hypothesis continues
// as the original does.
TEST_F(WhisperTiny, BatchedStepsEqualSingleSteps) {
  std::vector<float> two_in = fixtures::array_of<float>(fixture_dir() / "input_features_short.f32");
  two_in.insert(two_in.end(), features_.begin(), features_.end());
  auto audio = model_->encode(two_in, 2);
  auto a = model_->start(audio, 0), b = model_->start(audio, 1);
  const std::vector<std::vector<int32_t>> first = {{500, 17, 42}, {500}};
  WhisperSequence* both[] = {a.get(), b.get()};
  std::vector<float> batched;
  const int64_t rows[] = {2, 3};
  model_->decode(both, first, rows, batched);

  std::vector<float> alone_a, alone_b;
  auto a1 = model_->start(audio, 0), b1 = model_->start(audio, 1);
  WhisperSequence* sa[] = {a1.get()};
  WhisperSequence* sb[] = {b1.get()};
  const int64_t last_of_three[] = {2}, only[] = {0};
  model_->decode(sa, std::span(first.data(), 1), last_of_three, alone_a);
  model_->decode(sb, std::span(first.data() + 1, 1), only, alone_b);
  const size_t V = 512;
  EXPECT_EQ(max_abs_diff(std::span(batched.data(), V), alone_a), 0.0f);
  EXPECT_EQ(max_abs_diff(std::span(batched.data() + V, V), alone_b), 0.0f);

  auto copy = model_->start(audio, 0);
  model_->copy(*a, *copy);
  EXPECT_EQ(copy->length, 3);
  std::vector<float> next_a, next_copy;
  const std::vector<std::vector<int32_t>> next = {{99}};
  WhisperSequence* orig[] = {a.get()};
  WhisperSequence* dup[] = {copy.get()};
  model_->decode(orig, next, only, next_a);
  model_->decode(dup, next, only, next_copy);
  EXPECT_EQ(max_abs_diff(next_a, next_copy), 0.0f);
}

// Logits of the last token of `tokens` decoded in one step by a fresh hypothesis.
std::vector<float> fresh_logits(WhisperModel& model, std::shared_ptr<const EncodedAudio> audio,
                                const std::vector<int32_t>& tokens) {
  auto seq = model.start(std::move(audio), 0);
  WhisperSequence* one[] = {seq.get()};
  const std::vector<std::vector<int32_t>> step = {tokens};
  const int64_t last[] = {static_cast<int64_t>(tokens.size()) - 1};
  std::vector<float> logits;
  model.decode(one, step, last, logits);
  return logits;
}

// Copy on write: a hypothesis forked in the middle of a block, both continuing with
// different tokens past the next block boundary, each gives what a fresh hypothesis of
// its whole token list gives (within 1e-5: one step against many) — neither sees the
// other's writes. Dropping them returns every block.
TEST_F(WhisperTiny, ForkedHypothesesDivergeCleanly) {
  auto audio = model_->encode(features_, 1);
  std::vector<int32_t> common;
  for (int i = 0; i < 21; ++i) common.push_back((i * 37 + 5) % 500);
  {
    auto a = model_->start(audio, 0);
    WhisperSequence* sa[] = {a.get()};
    const std::vector<std::vector<int32_t>> prefix = {common};
    const int64_t none[] = {0};
    std::vector<float> logits;
    model_->decode(sa, prefix, none, logits);
    auto b = model_->start(audio, 0);
    model_->copy(*a, *b);
    EXPECT_EQ(model_->pool().self_blocks_used(), 2);  // shared, not copied
    std::vector<int32_t> ta = common, tb = common;
    std::vector<float> step_logits;
    for (int i = 0; i < 14; ++i) {
      ta.push_back(100 + i);
      tb.push_back(300 + 2 * i);
      WhisperSequence* both[] = {a.get(), b.get()};
      const std::vector<std::vector<int32_t>> next = {{ta.back()}, {tb.back()}};
      const int64_t rows[] = {0, 1};
      model_->decode(both, next, rows, step_logits);
    }
    const size_t V = 512;
    EXPECT_LT(max_abs_diff(std::span(step_logits.data(), V), fresh_logits(*model_, audio, ta)), 1e-5f);
    EXPECT_LT(max_abs_diff(std::span(step_logits.data() + V, V), fresh_logits(*model_, audio, tb)), 1e-5f);
    // 35 positions each, three blocks apiece; the first (positions 0-15) is never written
    // after the fork and stays shared.
    EXPECT_EQ(model_->pool().self_blocks_used(), 5);
  }
  EXPECT_EQ(model_->pool().self_blocks_used(), 0);
  audio.reset();
  EXPECT_EQ(model_->pool().cross_blocks_used(), 0);
}

// Several callers' windows in one encoder pass give each caller what encoding alone does.
TEST_F(WhisperTiny, EncodePartsEqualSeparateEncodes) {
  const std::vector<float> short_in = fixtures::array_of<float>(fixture_dir() / "input_features_short.f32");
  std::vector<float> both = features_;
  both.insert(both.end(), short_in.begin(), short_in.end());
  const int64_t parts[] = {1, 1};
  std::vector<float> together_a, together_b, alone_a, alone_b;
  {
    auto encoded = model_->encode_parts(both, parts);
    ASSERT_EQ(encoded.size(), 2u);
    together_a = fresh_logits(*model_, encoded[0], {500, 17, 42});
    together_b = fresh_logits(*model_, encoded[1], {500, 17, 42});
  }
  alone_a = fresh_logits(*model_, model_->encode(features_, 1), {500, 17, 42});
  alone_b = fresh_logits(*model_, model_->encode(short_in, 1), {500, 17, 42});
  EXPECT_EQ(max_abs_diff(together_a, alone_a), 0.0f);
  EXPECT_EQ(max_abs_diff(together_b, alone_b), 0.0f);
  EXPECT_GT(max_abs_diff(together_a, together_b), 1e-3f);  // the windows differ
}

// A pool spent is a clear error, and what it holds is untouched: the model was sized
// for 2 streams of 2 windows.
TEST_F(WhisperTiny, SpentPoolRefusesCleanly) {
  auto a = model_->encode(features_, 1);
  auto b = model_->encode(std::vector<float>(features_.size() * 3, 0.0f), 3);
  EXPECT_THROW(model_->encode(features_, 1), Error);
  EXPECT_EQ(model_->pool().cross_blocks_used(), 4);
  b.reset();
  EXPECT_EQ(model_->pool().cross_blocks_used(), 1);
  EXPECT_NO_THROW(model_->encode(features_, 1));
}

// The CPU's kernels read F32 keys and values only: a pool of another type is refused up
// front, and F32 is the CPU's default.
TEST_F(WhisperTiny, CpuPoolsAreF32) {
  EXPECT_EQ(model_->pool().kv_dtype(), DType::F32);
  EXPECT_EQ(WhisperKvPool::default_kv_dtype(Device::CPU), DType::F32);
  EXPECT_EQ(WhisperKvPool::default_kv_dtype(Device::CUDA), DType::F16);
  WhisperCapacity f16;
  f16.kv_dtype = DType::F16;
  EXPECT_THROW(WhisperKvPool(config_, f16, Device::CPU), Error);
}

TEST_F(WhisperTiny, RefusesBadSteps) {
  auto audio = model_->encode(features_, 1);
  auto seq = model_->start(audio, 0);
  WhisperSequence* seqs[] = {seq.get()};
  std::vector<float> logits;
  const int64_t last[] = {0};
  const std::vector<std::vector<int32_t>> bad_token = {{512}};
  EXPECT_THROW(model_->decode(seqs, bad_token, last, logits), Error);
  const std::vector<std::vector<int32_t>> too_long = {std::vector<int32_t>(449, 1)};
  EXPECT_THROW(model_->decode(seqs, too_long, last, logits), Error);
  EXPECT_THROW(model_->encode(std::span(features_.data(), 100), 1), Error);
  EXPECT_THROW(model_->start(audio, 1), Error);
}

}  // namespace
}  // namespace corvid
