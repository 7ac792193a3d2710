// The KV manager: layer groups from a state spec, the budget split between groups,
// sliding groups that release the blocks leaving their window, prefix reuse per group
// (a sliding group only reuses a prefix whose last window is cached), and — through
// the engine on sliding-window fixtures — that a long generation holds no more
// sliding blocks than its window needs while its output equals the model's alone.
#include <gtest/gtest.h>

#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/kv/kv_manager.h"
#include "fixture_util.h"

namespace corvid {
namespace {

LayerState full() { return {StateKind::FullKV, 1, 4}; }
LayerState sliding(int64_t window) { return {StateKind::SlidingKV, 1, 4, window}; }
LayerState shared(int64_t source) { return {StateKind::SharedKV, 1, 4, 0, source}; }

std::vector<int32_t> iota(int64_t n, int32_t first) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(first + static_cast<int32_t>(i));
  return t;
}

KvManagerConfig exact(int64_t block_size, int64_t num_blocks, int64_t max_chunk = 32) {
  KvManagerConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_seqs = 4;
  c.max_chunk = max_chunk;
  return c;
}

int64_t held(const SequenceKv& seq, size_t group) {
  int64_t n = 0;
  for (int32_t b : seq.tables[group]) n += b != SequenceKv::kNoBlock;
  return n;
}

TEST(KvGroups, GroupsLayersByKindAndWindow) {
  const std::vector<LayerState> spec = {sliding(8), full(), sliding(4), sliding(8), shared(1), shared(2)};
  const KvGrouping g = group_layers(spec);
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.groups[0].name(), "full");
  EXPECT_EQ(g.groups[1].name(), "sliding 4");
  EXPECT_EQ(g.groups[2].name(), "sliding 8");
  EXPECT_EQ(g.groups[0].layers, (std::vector<int64_t>{1}));
  EXPECT_EQ(g.groups[2].layers, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(g.group_of, (std::vector<int64_t>{2, 0, 1, 2, 0, 1}));
  EXPECT_EQ(g.index_of, (std::vector<int64_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_THROW(group_layers(std::vector<LayerState>{shared(0)}), Error);
}

TEST(KvManager, SharedLayersReadTheirSourcesStorage) {
  const std::vector<LayerState> spec = {full(), sliding(8), shared(0), shared(1)};
  KvManager kv(spec, exact(4, 8, /*max_chunk=*/16));
  EXPECT_EQ(kv.num_groups(), 2);
  EXPECT_EQ(kv.keys(2).data, kv.keys(0).data);
  EXPECT_EQ(kv.values(3).data, kv.values(1).data);
  EXPECT_NE(kv.keys(0).data, kv.keys(1).data);
  EXPECT_EQ(kv.keys(1).dim(0), 8 * 4);
}

TEST(KvManager, SplitsTheBudgetBetweenGroups) {
  const std::vector<LayerState> spec = {sliding(64), sliding(64), sliding(64), full()};
  KvManagerConfig c;
  c.block_size = 16;
  c.max_seqs = 4;
  c.max_chunk = 64;
  const int64_t full_block = 2 * 4 * 16 * 4, sliding_block = 3 * full_block;  // F32 bytes of one block
  c.budget_bytes = 1000 * (full_block + sliding_block);  // a uniform pool of 1000 blocks
  const KvGrouping g = group_layers(spec);
  const std::vector<int64_t> blocks = KvManager::plan_blocks(g.groups, c);
  // Sliding: 4 sequences at their window (63 / 16 + 2 = 5 blocks each) plus one 64-token
  // chunk (126 / 16 + 2 = 9); the full group gets everything else.
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[1], 4 * 5 + 9);
  EXPECT_EQ(blocks[0], (c.budget_bytes - blocks[1] * sliding_block) / full_block);
  EXPECT_GT(blocks[0], 1000);  // more full-attention context than a uniform pool gives
  KvManager kv(spec, c);
  EXPECT_EQ(kv.max_positions_per_sequence(), blocks[0] * 16);
  EXPECT_LE(kv.total_bytes(), c.budget_bytes);
  // A budget that cannot hold one sequence's chunk in the sliding group is refused up front.
  c.budget_bytes = 4 * (full_block + sliding_block);
  EXPECT_THROW(KvManager(spec, c), Error);
  // Only sliding layers: no KV bound on a sequence's length.
  const std::vector<LayerState> all_sliding = {sliding(16), sliding(16)};
  EXPECT_EQ(KvManager(all_sliding, exact(4, 32)).max_positions_per_sequence(), INT32_MAX);
}

TEST(KvManager, SlidingGroupReleasesBlocksLeavingTheWindow) {
  const std::vector<LayerState> spec = {full(), sliding(8)};
  KvManager kv(spec, exact(4, 16));
  const std::vector<int32_t> tokens = iota(40, 100);
  SequenceKv seq;
  EXPECT_EQ(kv.acquire_prefix(tokens, 4, seq), 0);
  ASSERT_TRUE(kv.reserve(seq, 0, 5));
  kv.commit(seq, tokens, 5);
  EXPECT_EQ(held(seq, 1), 2);
  for (int64_t pos = 5; pos < 40; ++pos) {
    ASSERT_TRUE(kv.reserve(seq, pos, pos + 1)) << pos;
    // The query at pos sees [pos - 7, pos]: at most 3 blocks of 4.
    EXPECT_LE(held(seq, 1), 3) << pos;
    kv.commit(seq, tokens, pos + 1);
  }
  EXPECT_EQ(held(seq, 0), 10);  // the full group keeps all 40 positions
  EXPECT_EQ(seq.tables[1][0], SequenceKv::kNoBlock);
  const std::vector<KvGroupStats> stats = kv.group_stats();
  EXPECT_EQ(stats[0].blocks_used, 10);
  EXPECT_LE(stats[1].blocks_used, 3);
  EXPECT_EQ(stats[1].peak_blocks_per_sequence, 3);
  EXPECT_EQ(stats[0].peak_blocks_per_sequence, 10);
  kv.release(seq);
  EXPECT_EQ(kv.blocks_used(), 0);
  // A 40-position sequence in a 16-block sliding pool ran; a second one could too, since
  // released blocks went back (cached) and the pool never held more than 3.
}

TEST(KvManager, PrefixReuseNeedsTheSlidingWindowBeforeItsEnd) {
  const std::vector<LayerState> spec = {full(), sliding(8)};
  KvManager kv(spec, exact(4, 8, /*max_chunk=*/16));
  const std::vector<int32_t> a = iota(24, 100);
  SequenceKv sa;
  kv.acquire_prefix(a, 23, sa);
  ASSERT_TRUE(kv.reserve(sa, 0, 24));
  kv.commit(sa, a, 24);  // the sliding group releases A's blocks 0..3 (cached, evictable)
  EXPECT_EQ(held(sa, 1), 2);
  kv.release(sa);
  // B takes the last two free blocks of each group and one more: the full group evicts
  // A's last block (released last... first: tails go first), the sliding group A's first.
  const std::vector<int32_t> b = iota(12, 500);
  SequenceKv sb;
  EXPECT_EQ(kv.acquire_prefix(b, 11, sb), 0);
  ASSERT_TRUE(kv.reserve(sb, 0, 12));
  kv.commit(sb, b, 12);
  // C shares A's first 20 tokens: the full group has A's blocks 0..4; the window before
  // position 20 is blocks 3..4, which the sliding group still has. 20 tokens reused.
  std::vector<int32_t> c(a.begin(), a.begin() + 20);
  c.push_back(7);
  SequenceKv sc;
  EXPECT_EQ(kv.acquire_prefix(c, 20, sc), 20);
  EXPECT_EQ(held(sc, 0), 5);
  EXPECT_EQ(held(sc, 1), 2);
  EXPECT_EQ(sc.tables[1][2], SequenceKv::kNoBlock);
  kv.release(sc);
  // D shares A's first 8: the full group has both blocks, but the window before position 8
  // (or 4) needs A's block 0, which the sliding group evicted. Nothing is reused.
  std::vector<int32_t> d(a.begin(), a.begin() + 8);
  d.push_back(7);
  SequenceKv sd;
  EXPECT_EQ(kv.acquire_prefix(d, 8, sd), 0);
  EXPECT_EQ(held(sd, 0), 0);
  kv.release(sd);
  kv.release(sb);
  EXPECT_EQ(kv.blocks_used(), 0);
}

// ---- through the engine, on sliding-window fixtures ----

class SlidingEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(SlidingEngine, LongGenerationHoldsOnlyTheWindowAndMatchesAlone) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / GetParam()).string());
  const std::vector<LayerState>& spec = m.model->state_spec();
  int64_t window = 0;
  for (const LayerState& s : spec)
    if (s.kind == StateKind::SlidingKV) window = s.window;
  ASSERT_GT(window, 0) << GetParam() << " has no sliding layer";
  const std::vector<int32_t> prompt = iota(9, 5);
  const int64_t n_new = 120;
  const std::vector<int32_t> want = fixtures::greedy(*m.runner, prompt, n_new);
  EngineConfig config;
  config.num_blocks = 96;
  config.block_size = 4;
  config.scheduler = {4, 24};
  Engine engine(*m.runner, m.tokenizer.get(), config);
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n_new;
  r.ignore_eos = true;
  EXPECT_EQ(engine.submit(r).wait().token_ids, want);
  // Again: the prefix (prompt + what was generated is not cached beyond the prompt's
  // blocks) comes from the cache in every group, with the same output.
  const RequestResult again = engine.submit(r).wait();
  EXPECT_EQ(again.token_ids, want);
  EXPECT_EQ(again.cached_tokens, 8);
  engine.shutdown();
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.blocks_used, 0);
  bool saw_sliding = false;
  for (const KvGroupStats& g : s.kv_groups) {
    if (g.window > 0) {
      saw_sliding = true;
      // A query sees `window` positions: window / 4 + 1 blocks at most (the 9-token
      // prompt's chunk needs fewer).
      EXPECT_LE(g.peak_blocks_per_sequence, window / 4 + 1) << g.name;
    } else {
      EXPECT_EQ(g.peak_blocks_per_sequence, (9 + n_new - 1 + 3) / 4) << g.name;  // every position kept
    }
  }
  EXPECT_TRUE(saw_sliding);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SlidingEngine,
                         ::testing::Values("gemma3", "gemma4", "gemma4_wide", "mistral_swa", "qwen2_swa"));

}  // namespace
}  // namespace corvid
