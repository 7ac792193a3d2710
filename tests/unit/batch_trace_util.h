// Greedy traces of a model run two ways — each prompt alone through forward() and
// all prompts together through the Scheduler and forward_batch() — for tests that
// compare them (scheduler_test.cc on the CPU, cuda_batched_test.cc on the GPU).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "corvid/engine/sampler.h"
#include "corvid/engine/scheduler.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/engine/runner.h"
#include "ops_test_util.h"

namespace corvid::testing {

// A KV manager of exactly `num_blocks` blocks in every layer group, sized for `config`'s steps.
inline KvManagerConfig kv_config(int64_t block_size, int64_t num_blocks, const SchedulerConfig& config = {},
                                 Device device = Device::CPU, bool prefix_caching = true) {
  KvManagerConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.device = device;
  c.prefix_caching = prefix_caching;
  c.max_seqs = config.max_num_seqs;
  c.max_chunk = config.max_num_batched_tokens;
  return c;
}

inline Sequence make_seq(int64_t id, std::vector<int32_t> tokens) {
  Sequence s;
  s.id = id;
  s.prompt_len = static_cast<int64_t>(tokens.size());
  s.tokens = std::move(tokens);
  return s;
}

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // the logits each token was drawn from
};

// Greedy alone: one contiguous KV cache, the whole prompt in one forward, then one token at a time.
inline Trace run_alone(Runner& model, const std::vector<int32_t>& prompt, int64_t n_new) {
  const int64_t vocab = model.config().vocab_size;
  KVCache kv(model.model().state_spec(), static_cast<int64_t>(prompt.size()) + n_new, model.device());
  OwnedTensor logits(DType::F32, {1, vocab});
  std::vector<int32_t> seq = prompt, positions;
  Trace t;
  size_t done = 0;
  while (static_cast<int64_t>(t.tokens.size()) < n_new) {
    positions.clear();
    for (size_t i = done; i < seq.size(); ++i) positions.push_back(static_cast<int32_t>(i));
    model.forward(std::span<const int32_t>(seq.data() + done, seq.size() - done), positions, kv, logits.tensor, false);
    done = seq.size();
    const float* row = logits.ptr<float>();
    t.logits.emplace_back(row, row + vocab);
    t.tokens.push_back(argmax(t.logits.back()));
    seq.push_back(t.tokens.back());
  }
  return t;
}

// Greedy in batches: all prompts through one scheduler over a pool of `num_blocks`.
inline std::vector<Trace> run_batched(Runner& model, const std::vector<std::vector<int32_t>>& prompts, int64_t n_new,
                               const SchedulerConfig& config, int64_t block_size, int64_t num_blocks,
                               int64_t* preemptions = nullptr, int64_t* prefilled = nullptr) {
  const int64_t vocab = model.config().vocab_size;
  KvManager kv(model.model().state_spec(), kv_config(block_size, num_blocks, config, model.device()));
  Scheduler sched(kv, config);
  std::vector<Sequence> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(make_seq(static_cast<int64_t>(i), prompts[i]));
  for (Sequence& s : seqs) sched.add(&s);
  std::vector<Trace> traces(prompts.size());
  std::vector<BatchSequence> batch;
  int64_t steps = 0;
  while (sched.num_running() + sched.num_waiting() > 0) {
    StepPlan plan = sched.schedule();
    EXPECT_FALSE(plan.empty());
    if (plan.empty() || ++steps > 10000) break;
    EXPECT_LE(plan.tokens, config.max_num_batched_tokens);
    if (prefilled) *prefilled += plan.tokens;
    batch.clear();
    int64_t n_out = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      batch.push_back({std::span<const int32_t>(c.seq->tokens.data() + c.start, static_cast<size_t>(c.n)),
                       static_cast<int32_t>(c.start), c.seq->kv.tables, c.sample});
      n_out += c.sample;
    }
    OwnedTensor logits(DType::F32, {n_out, vocab});
    model.forward_batch(batch, kv, logits.tensor);
    sched.commit(plan);
    int64_t row = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      const float* r = logits.tensor.row<float>(row++);
      Trace& t = traces[static_cast<size_t>(c.seq->id)];
      t.logits.emplace_back(r, r + vocab);
      t.tokens.push_back(argmax(t.logits.back()));
      c.seq->tokens.push_back(t.tokens.back());
      if (static_cast<int64_t>(t.tokens.size()) == n_new) sched.remove(c.seq);
    }
  }
  EXPECT_EQ(kv.blocks_used(), 0);
  if (preemptions) *preemptions = sched.num_preemptions();
  return traces;
}

inline std::vector<std::vector<int32_t>> test_prompts(int64_t vocab, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(1 + rng() % 40));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    prompts.push_back(p);
  }
  prompts[1] = prompts[0];  // an identical prompt (prefix cache hit)
  prompts[2].insert(prompts[2].begin(), prompts[0].begin(), prompts[0].end());  // a shared prefix
  return prompts;
}

}  // namespace corvid::testing
