// The delayed switch (--kv-quant-start N: kv/kv_store.h KvSegment, kv/kv_manager.h): a
// coded layer keeps a sequence's first N positions in f32 (CPU) and codes the rest.
// Attention over the two parts merged by their log-sum-exps equals attention over all
// keys; the pools and the contiguous cache hold the formats they say; the engine's
// batched steps (preemption and prefix hits included) give a session's tokens; a switch
// past the sequence's end gives the unquantized cache's bits.
#include <gtest/gtest.h>

#include <numeric>

#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/runner.h"
#include "corvid/engine/session.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/ops/kv_codec.h"
#include "corvid/ops/ops.h"
#include "engine_runs.h"
#include "fixture_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::bitwise_equal;
using testing::f32_tensor;
using testing::random_floats;

LoadedModel tiny() { return LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string()); }

// Keys and values of len positions split at `split`: attention over the head (positions
// clamped to split - 1) and over the tail (positions counted from split, negative before
// it) merged equals attention over the whole cache, for queries on both sides.
TEST(DelayedKv, MergedPartsEqualAttentionOverAllKeys) {
  const int64_t heads = 4, kv_heads = 2, d = 64, len = 150, split = 40;
  const auto kv = random_floats(static_cast<size_t>(2 * len * kv_heads * d), 31, 1.5f);
  const int64_t row = kv_heads * d;
  auto rows_of = [&](int64_t from, int64_t to, int64_t offset) {
    return f32_tensor({to - from, kv_heads, d}, std::vector<float>(kv.begin() + offset + from * row,
                                                                    kv.begin() + offset + to * row));
  };
  OwnedTensor k = rows_of(0, len, 0), v = rows_of(0, len, len * row);
  OwnedTensor kh = rows_of(0, split, 0), vh = rows_of(0, split, len * row);
  OwnedTensor kt = rows_of(split, len, 0), vt = rows_of(split, len, len * row);
  const std::vector<int32_t> positions = {0, 5, 39, 40, 41, 63, 64, 100, 149};
  const int64_t n = static_cast<int64_t>(positions.size());
  std::vector<int32_t> head_pos, tail_pos;
  for (int32_t p : positions) {
    head_pos.push_back(std::min<int32_t>(p, split - 1));
    tail_pos.push_back(p - static_cast<int32_t>(split));
  }
  OwnedTensor q = f32_tensor({n, heads, d}, random_floats(static_cast<size_t>(n * heads * d), 32));
  OwnedTensor whole(DType::F32, {n, heads, d}), got(DType::F32, {n, heads, d}), other(DType::F32, {n, heads, d});
  OwnedTensor lse(DType::F32, {n, heads}), other_lse(DType::F32, {n, heads});
  ops::attention(q.tensor, k.tensor, v.tensor, positions, 0.125f, 0, whole.tensor);
  ops::attention(q.tensor, kh.tensor, vh.tensor, head_pos, 0.125f, 0, got.tensor, &lse.tensor);
  ops::attention(q.tensor, kt.tensor, vt.tensor, tail_pos, 0.125f, 0, other.tensor, &other_lse.tensor);
  for (int64_t i = 0; i < n; ++i) {
    const bool tail_empty = positions[static_cast<size_t>(i)] < split;
    for (int64_t h = 0; h < heads; ++h) EXPECT_EQ(other_lse.ptr<float>()[i * heads + h] == -INFINITY, tail_empty) << i;
  }
  ops::merge_attention(got.tensor, lse.tensor, other.tensor, other_lse.tensor);
  for (int64_t i = 0; i < n * heads * d; ++i)
    ASSERT_NEAR(got.ptr<float>()[i], whole.ptr<float>()[i], 2e-6f) << "query " << i / (heads * d);
  // The log-sum-exp itself: a lone key's is its scaled score.
  OwnedTensor one(DType::F32, {1, heads, d}), one_lse(DType::F32, {1, heads});
  const std::vector<int32_t> first = {0};
  ops::attention(Tensor(DType::F32, {1, heads, d}, q.ptr<float>(), Device::CPU), k.tensor, v.tensor, first, 0.125f, 0,
                 one.tensor, &one_lse.tensor);
  float score = 0;
  for (int64_t i = 0; i < d; ++i) score += q.ptr<float>()[i] * k.ptr<float>()[i];
  EXPECT_NEAR(one_lse.ptr<float>()[0], score * 0.125f, 1e-5f);
}

// Negative positions are for a part's lse only: without one they are refused.
TEST(DelayedKv, NegativePositionsNeedAnLse) {
  OwnedTensor q(DType::F32, {1, 2, 8}), k(DType::F32, {4, 1, 8}), v(DType::F32, {4, 1, 8}), out(DType::F32, {1, 2, 8});
  const std::vector<int32_t> before = {-3};
  EXPECT_THROW(ops::attention(q.tensor, k.tensor, v.tensor, before, 1.0f, 0, out.tensor), Error);
  OwnedTensor lse(DType::F32, {1, 2});
  ops::attention(q.tensor, k.tensor, v.tensor, before, 1.0f, 0, out.tensor, &lse.tensor);
  EXPECT_EQ(lse.ptr<float>()[0], -INFINITY);
}

// The contiguous cache: layer 0's keys of positions < N (which depend on the tokens
// alone) are the f32 cache's bit for bit, later ones q4 codes of them at row p - N.
TEST(DelayedKv, ContiguousCacheHoldsTheFormatsItSays) {
  LoadedModel m = tiny();
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 3, 250, 7, 120, 64, 33, 8, 200, 11, 90};
  const int64_t split = 6, n = static_cast<int64_t>(prompt.size()), vocab = m.model->config().vocab_size;
  std::vector<int32_t> positions(prompt.size());
  std::iota(positions.begin(), positions.end(), 0);
  OwnedTensor logits(DType::F32, {n, vocab});
  KVCache plain(m.model->state_spec(), 32, Device::CPU, DType::F32);
  KVCache delayed(m.model->state_spec(), 32, Device::CPU, DType::A4G64, split);
  m.runner->forward(prompt, positions, plain, logits.tensor, true);
  m.runner->forward(prompt, positions, delayed, logits.tensor, true);
  ASSERT_EQ(delayed.head_group_of(0), 1);
  EXPECT_EQ(delayed.head_format(0), KvFormat(DType::F32));
  EXPECT_EQ(delayed.format(0), KvFormat(DType::A4G64));
  EXPECT_EQ(delayed.segment(2), (KvSegment{split, INT64_MAX}));
  const Tensor& k = plain.keys(0);
  const int64_t row = k.dim(1) * k.dim(2);
  EXPECT_TRUE(bitwise_equal(delayed.head_keys(0).ptr<float>(), k.ptr<float>(), static_cast<size_t>(split * row)));
  std::vector<float> decoded(static_cast<size_t>((n - split) * row));
  ops::kv_codec::decode(DType::A4G64, static_cast<const uint8_t*>(delayed.keys(0).data), (n - split) * row,
                        decoded.data());
  float worst = 0, peak = 0;
  for (int64_t i = 0; i < (n - split) * row; ++i) {
    worst = std::max(worst, std::abs(decoded[static_cast<size_t>(i)] - k.ptr<float>()[split * row + i]));
    peak = std::max(peak, std::abs(k.ptr<float>()[split * row + i]));
  }
  EXPECT_GT(worst, 0);            // coded, not copied
  EXPECT_LT(worst, 0.15f * peak);  // within 4-bit codes' reach (a step is range / 15)
}

// The paged pool: the head group in f32 below N (rounded up to whole blocks), rotated as
// a TurboQuant tail is; the tail group coded from there; a sequence's tables hold each
// part's blocks only; the capacity counts both.
TEST(DelayedKv, PoolsSplitAtWholeBlocks) {
  const std::vector<LayerState> spec(2, LayerState{StateKind::FullKV, 2, 64});
  KvManagerConfig c;
  c.block_size = 4;
  c.num_blocks = 10;
  c.format = *kv_format_from_name("turbo:k8v3");
  c.quant_start = 6;  // -> 8
  KvManager kv(spec, c);
  ASSERT_EQ(kv.num_groups(), 2);
  EXPECT_EQ(kv.group_of(1), 0);
  EXPECT_EQ(kv.head_group_of(1), 1);
  EXPECT_EQ(kv.segment(0), (KvSegment{8, INT64_MAX}));
  EXPECT_EQ(kv.segment(1), (KvSegment{0, 8}));
  EXPECT_EQ(kv.head_format(0), KvFormat(DType::F32, DType::F32, true, true));
  EXPECT_EQ(kv.head_keys(0).dtype, DType::F32);
  EXPECT_EQ(kv.keys(0).dtype, DType::A8G64);
  EXPECT_EQ(kv.values(0).dtype, DType::T3G64);
  EXPECT_EQ(kv.group_stats()[0].name, "full from 8");
  EXPECT_EQ(kv.group_stats()[1].name, "full " + kv_format_name(kv.head_format(0)) + " below 8");
  EXPECT_EQ(kv.max_positions_per_sequence(), 8 + 10 * 4);
  SequenceKv seq;
  ASSERT_TRUE(kv.reserve(seq, 0, 18));
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_EQ(seq.tables[0][b] >= 0, b >= 2) << b;  // the tail: blocks 2..4
    EXPECT_EQ(seq.tables[1][b] >= 0, b < 2) << b;   // the head: blocks 0, 1
  }
  EXPECT_EQ(kv.blocks_used(), 5);
  kv.release(seq);
  EXPECT_EQ(kv.blocks_used(), 0);
  // A plain or sliding format is not split.
  c.format = DType::F32;
  EXPECT_EQ(KvManager(spec, c).num_groups(), 1);
}

// A budget gives the head pool what max_seqs heads need, at most half of it.
TEST(DelayedKv, HeadPoolIsSizedForTheRunningHeads) {
  const std::vector<LayerState> spec(2, LayerState{StateKind::FullKV, 2, 64});
  KvManagerConfig c;
  c.block_size = 16;
  c.budget_bytes = int64_t{64} << 20;
  c.format = DType::A8G64;
  c.max_seqs = 4;
  c.quant_start = 256;
  const KvManager kv(spec, c);
  EXPECT_EQ(kv.group_blocks(1), 4 * 16);
  EXPECT_LE(kv.total_bytes(), c.budget_bytes);
  EXPECT_GT(kv.group_blocks(0) * 16, 64 * 1024);  // the rest holds tens of thousands of coded positions
}

class DelayedKvEngine : public ::testing::TestWithParam<KvFormat> {};

// Batched engine steps (with preemption) give a session's greedy tokens alone, the
// switch landing inside the prompts (17..25 tokens) for some and after them for others.
TEST_P(DelayedKvEngine, BatchedGreedyEqualsSessionAlone) {
  const KvFormat t = GetParam();
  LoadedModel m = tiny();
  const auto prompts = fixtures::random_prompts(6, 17, 25, static_cast<int32_t>(m.model->config().vocab_size));
  for (const int64_t start : {int64_t{8}, int64_t{20}}) {
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(fixtures::greedy(*m.runner, p, 16, t, {}, start));
    fixtures::expect_batched_equals_alone(*m.runner, m.tokenizer.get(), prompts, alone, 16, t, start);
  }
}

// A switch past the sequence's end keeps everything in f32: the plain cache's tokens.
// One at 0 is the coded cache.
TEST_P(DelayedKvEngine, SwitchAfterTheEndIsTheUnquantizedCache) {
  const KvFormat t = GetParam();
  LoadedModel m = tiny();
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 3, 250, 7, 120, 64, 33, 8, 200};
  const auto plain = fixtures::greedy(*m.runner, prompt, 20, DType::F32);
  EXPECT_EQ(fixtures::greedy(*m.runner, prompt, 20, t, {}, 1000), plain);
  EXPECT_EQ(fixtures::greedy(*m.runner, prompt, 20, t, {}, 0), fixtures::greedy(*m.runner, prompt, 20, t));
}

// k tokens appended in one step across the switch give k one-token steps' bits.
TEST_P(DelayedKvEngine, MultiTokenAppendEqualsOneTokenSteps) {
  LoadedModel m = tiny();
  fixtures::expect_append_equals_one_token_steps(*m.runner, GetParam(), 6);  // the switch at 6
}

// A prompt seen before reuses its blocks of both parts, and its tokens stay the same.
TEST_P(DelayedKvEngine, PrefixHitsReuseBothParts) {
  const KvFormat t = GetParam();
  LoadedModel m = tiny();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back(5 + 3 * i);
  const auto want = fixtures::greedy(*m.runner, prompt, 8, t, {}, 8);
  EngineConfig c;
  c.num_blocks = 64;
  c.block_size = 4;
  c.scheduler = {8, 24};
  c.kv_format = t;
  c.kv_quant_start = 8;
  Engine engine(*m.runner, m.tokenizer.get(), c);
  auto run = [&] {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 8;
    r.ignore_eos = true;
    return engine.submit(r).wait();
  };
  const RequestResult first = run(), second = run();
  EXPECT_EQ(first.token_ids, want);
  EXPECT_EQ(second.token_ids, want);
  EXPECT_EQ(second.cached_tokens, 20);  // two head blocks and three tail blocks of 4
  engine.shutdown();
}

INSTANTIATE_TEST_SUITE_P(Formats, DelayedKvEngine,
                         ::testing::Values(KvFormat(DType::A4G64), *kv_format_from_name("turbo:k8v3")),
                         [](const ::testing::TestParamInfo<KvFormat>& p) {
                           return fixtures::test_name(kv_format_name(p.param));
                         });

}  // namespace
}  // namespace corvid
