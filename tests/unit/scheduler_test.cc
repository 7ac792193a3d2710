// The scheduler and Runner::forward_batch: batch composition (decode first,
// chunked prefill under the token budget, sequence cap), prefix reuse, preemption
// by recompute, and the key property — a sequence run in a batch with others gives
// exactly the same logits (bit for bit) and tokens as run alone.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/sampler.h"
#include "corvid/engine/scheduler.h"
#include "batch_trace_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using namespace corvid::testing;

std::vector<LayerState> pool_config() { return uniform_kv_spec(/*layers=*/1, /*kv_heads=*/1, /*head_dim=*/4); }

std::vector<int32_t> tokens_from(int32_t first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// Pretends to run the plan: commits it and appends a token to each sampled sequence.
void fake_step(Scheduler& sched, const StepPlan& plan) {
  sched.commit(plan);
  for (const ScheduledChunk& c : plan.chunks)
    if (c.sample) c.seq->tokens.push_back(7);
}

TEST(Scheduler, ChunksPrefillUnderTheTokenBudgetAndDecodesFirst) {
  KvManager kv(pool_config(), kv_config(4, 64));
  Scheduler sched(kv, {/*max_num_seqs=*/4, /*max_num_batched_tokens=*/8});
  Sequence a = make_seq(1, tokens_from(10, 3)), b = make_seq(2, tokens_from(20, 13));
  sched.add(&a);
  sched.add(&b);
  StepPlan p1 = sched.schedule();
  ASSERT_EQ(p1.chunks.size(), 2u);
  EXPECT_EQ(p1.chunks[0].seq, &a);
  EXPECT_EQ(p1.chunks[0].n, 3);
  EXPECT_TRUE(p1.chunks[0].sample);
  EXPECT_EQ(p1.chunks[1].n, 5);  // what the budget leaves
  EXPECT_FALSE(p1.chunks[1].sample);
  EXPECT_EQ(p1.tokens, 8);
  fake_step(sched, p1);
  StepPlan p2 = sched.schedule();
  ASSERT_EQ(p2.chunks.size(), 2u);
  EXPECT_EQ(p2.chunks[0].seq, &a);  // the decode token first
  EXPECT_EQ(p2.chunks[0].n, 1);
  EXPECT_EQ(p2.chunks[1].seq, &b);
  EXPECT_EQ(p2.chunks[1].start, 5);
  EXPECT_EQ(p2.chunks[1].n, 7);
  fake_step(sched, p2);
  StepPlan p3 = sched.schedule();
  ASSERT_EQ(p3.chunks.size(), 2u);
  EXPECT_EQ(p3.chunks[1].n, 1);  // b's last prompt token, sampled
  EXPECT_TRUE(p3.chunks[1].sample);
  EXPECT_EQ(b.kv.tables[0].size(), 4u);  // 13 positions in blocks of 4
  fake_step(sched, p3);
  sched.remove(&a);
  sched.remove(&b);
  EXPECT_EQ(kv.blocks_used(), 0);
}

TEST(Scheduler, CapsRunningSequences) {
  KvManager kv(pool_config(), kv_config(4, 64));
  Scheduler sched(kv, {/*max_num_seqs=*/2, /*max_num_batched_tokens=*/64});
  std::vector<Sequence> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(make_seq(i, tokens_from(10 * i, 5)));
  for (Sequence& s : seqs) sched.add(&s);
  StepPlan p = sched.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(sched.num_running(), 2);
  EXPECT_EQ(sched.num_waiting(), 1);
  fake_step(sched, p);
  sched.remove(&seqs[0]);
  p = sched.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);  // seqs[1]'s decode, then seqs[2] admitted
  EXPECT_EQ(p.chunks[1].seq, &seqs[2]);
  const SchedulerConfig too_few_tokens{8, 4};
  EXPECT_THROW(too_few_tokens.validate(), Error);
}

TEST(Scheduler, ReusesCachedPrefixBlocks) {
  KvManager kv(pool_config(), kv_config(4, 64));
  Scheduler sched(kv, {4, 64});
  Sequence a = make_seq(1, tokens_from(10, 10));
  sched.add(&a);
  fake_step(sched, sched.schedule());
  const std::vector<int32_t> a_blocks = a.kv.tables[0];
  sched.remove(&a);
  auto prompt = tokens_from(10, 9);  // shares two full blocks
  prompt.push_back(99);
  Sequence b = make_seq(2, prompt);
  sched.add(&b);
  StepPlan p = sched.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(p.chunks[0].n, 2);
  EXPECT_EQ(b.cached_tokens, 8);
  EXPECT_EQ(std::vector<int32_t>(b.kv.tables[0].begin(), b.kv.tables[0].begin() + 2),
            std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 2));
  // An 8-token prompt equal to the cached blocks still runs its last token.
  Sequence c = make_seq(3, tokens_from(10, 8));
  sched.add(&c);
  p = sched.schedule();
  EXPECT_EQ(c.cached_tokens, 4);
  EXPECT_EQ(kv.query_tokens(), 10 + 10 + 8);
  EXPECT_EQ(kv.hit_tokens(), 8 + 4);
  sched.remove(&b);
  sched.remove(&c);
  EXPECT_EQ(kv.blocks_used(), 0);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  KvManager kv(pool_config(), kv_config(2, 4, {}, Device::CPU, /*prefix_caching=*/false));  // 8 positions in all
  Scheduler sched(kv, {4, 64});
  Sequence a = make_seq(1, tokens_from(10, 3)), b = make_seq(2, tokens_from(20, 3));
  sched.add(&a);
  sched.add(&b);
  fake_step(sched, sched.schedule());  // each holds 2 blocks, 4 tokens
  fake_step(sched, sched.schedule());  // each computes position 3 within its 2 blocks
  EXPECT_EQ(kv.blocks_used(), kv.blocks_total());
  StepPlan p = sched.schedule();  // a needs a third block: b (newest) is preempted
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, &a);
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_TRUE(b.kv.empty());
  EXPECT_EQ(b.computed, 0);
  EXPECT_EQ(sched.num_waiting(), 1);
  EXPECT_EQ(b.tokens.size(), 5u);  // what it generated is kept and recomputed later
  fake_step(sched, p);
  sched.remove(&a);
  p = sched.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, &b);
  EXPECT_EQ(p.chunks[0].n, 5);
  sched.remove(&b);
  EXPECT_EQ(kv.blocks_used(), 0);
}

// ---- forward_batch against forward(), through the scheduler ----

void expect_same_traces(const std::vector<Trace>& got, const std::vector<Trace>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " sequence " << i;
    ASSERT_EQ(got[i].logits.size(), want[i].logits.size());
    for (size_t s = 0; s < got[i].logits.size(); ++s) {
      EXPECT_EQ(std::memcmp(got[i].logits[s].data(), want[i].logits[s].data(), got[i].logits[s].size() * 4), 0)
          << what << " sequence " << i << " step " << s << ": logits differ";
    }
  }
}

class SchedulerBatchedForward : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerBatchedForward, MatchesEachSequenceAloneBitForBit) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / GetParam()).string());
  const auto prompts = test_prompts(m.model->config().vocab_size, 6, 5);
  const int64_t n_new = 12;
  std::vector<Trace> alone;
  for (const auto& p : prompts) alone.push_back(run_alone(*m.runner, p, n_new));
  // A roomy pool with a small budget (prefill chunks next to decode tokens).
  expect_same_traces(run_batched(*m.runner, prompts, n_new, {4, 16}, 4, 256), alone, "roomy pool");
  // A pool too small for everyone at once: preemption by recompute.
  int64_t preemptions = 0;
  expect_same_traces(run_batched(*m.runner, prompts, n_new, {6, 64}, 4, 26, &preemptions), alone, "tiny pool");
  EXPECT_GT(preemptions, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SchedulerBatchedForward, ::testing::ValuesIn(fixtures::tiny_fixtures()),
                         [](const auto& param_info) { return fixtures::test_name(param_info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SchedulerBatchedForward);

TEST(SchedulerBatchedForward, PrefixHitsPrefillFewerTokensWithTheSameOutput) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string());
  std::vector<int32_t> shared = tokens_from(3, 24);
  std::vector<std::vector<int32_t>> prompts = {shared, shared, shared};
  prompts[2].push_back(9);
  std::vector<Trace> alone;
  for (const auto& p : prompts) alone.push_back(run_alone(*m.runner, p, 4));
  // One at a time (max_num_seqs 1), so the later prompts find the first one's blocks.
  int64_t prefilled = 0;
  expect_same_traces(run_batched(*m.runner, prompts, 4, {1, 64}, 4, 64, nullptr, &prefilled), alone, "prefix");
  const int64_t without_cache = 24 + 24 + 25 + 3 * 3;  // prompts, then 3 decode steps each
  EXPECT_EQ(prefilled, without_cache - 20 - 24);  // 5 of 6 blocks, then all 6 of the shared prefix reused
}

TEST(SchedulerBatchedForward, RejectsBadBatches) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string());
  const int64_t vocab = m.model->config().vocab_size;
  KvManager kv(m.model->state_spec(), kv_config(4, 8));
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5}, bad_token = {1, static_cast<int32_t>(vocab)};
  using Tables = std::vector<std::vector<int32_t>>;  // one per KV group (this model has one)
  const Tables two_blocks = {{0, 1}}, one_block = {{0}}, outside = {{0, 8}}, released = {{-1, 1}};
  const Tables no_groups, two_groups = {{0, 1}, {2, 3}};
  OwnedTensor one_row(DType::F32, {1, vocab}), two_rows(DType::F32, {2, vocab});
  auto run = [&](std::vector<BatchSequence> batch, const Tensor& logits) {
    m.runner->forward_batch(batch, kv, logits);
  };
  EXPECT_NO_THROW(run({{tokens, 0, two_blocks, true}}, one_row.tensor));
  EXPECT_THROW(run({{tokens, 0, one_block, true}}, one_row.tensor), Error);   // 5 positions, 4 slots
  EXPECT_THROW(run({{tokens, 0, outside, true}}, one_row.tensor), Error);     // block 8 of 8
  EXPECT_THROW(run({{tokens, 0, released, true}}, one_row.tensor), Error);    // position 0 has no block
  EXPECT_THROW(run({{tokens, 0, no_groups, true}}, one_row.tensor), Error);
  EXPECT_THROW(run({{tokens, 0, two_groups, true}}, one_row.tensor), Error);
  EXPECT_THROW(run({{bad_token, 0, two_blocks, true}}, one_row.tensor), Error);
  EXPECT_THROW(run({{tokens, 0, two_blocks, true}}, two_rows.tensor), Error);  // one row wanted
  EXPECT_THROW(run({}, one_row.tensor), Error);
  KvManager other_shape(pool_config(), kv_config(4, 8));
  const std::vector<BatchSequence> batch = {{tokens, 0, two_blocks, true}};
  EXPECT_THROW(m.runner->forward_batch(batch, other_shape, one_row.tensor), Error);
}

TEST(SchedulerBatchedForward, SmolLM2EightPromptsMatchAlone) {
  const fs::path path = fixtures::source_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched";
  LoadedModel m = LoadedModel::load(path.string());
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The capital of France is", "def fibonacci(n):", "Once upon a time", "1, 2, 3, 4,",
                           "The quick brown fox", "Water boils at", "In 1492, Columbus", "The best way to learn"}) {
    prompts.push_back(m.tokenizer->encode(text, true));
  }
  std::vector<Trace> alone;
  for (const auto& p : prompts) alone.push_back(run_alone(*m.runner, p, 16));
  expect_same_traces(run_batched(*m.runner, prompts, 16, {8, 32}, 16, 64), alone, "smollm2");
}

}  // namespace
}  // namespace corvid
