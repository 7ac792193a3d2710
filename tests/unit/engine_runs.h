// Engine runs the tests compare with sessions alone (fixture_util.h greedy): random
// prompts, and an engine's batched greedy tokens for them.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "corvid/engine/engine.h"

namespace corvid::fixtures {

inline std::vector<std::vector<int32_t>> random_prompts(int count, uint32_t seed, int max_len, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(1 + rng() % static_cast<uint32_t>(max_len)));
    for (int32_t& id : p) id = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3));
    prompts.push_back(p);
  }
  return prompts;
}

// Every prompt submitted at once to `engine`, n greedy tokens each (EOS ignored).
inline std::vector<std::vector<int32_t>> engine_greedy(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                       int64_t n) {
  std::vector<RequestHandle> handles;
  for (const auto& p : prompts) {
    GenerationRequest r;
    r.prompt = p;
    r.max_tokens = n;
    r.ignore_eos = true;
    handles.push_back(engine.submit(r));
  }
  std::vector<std::vector<int32_t>> out;
  for (RequestHandle& h : handles) {
    RequestResult r = h.wait();
    EXPECT_NE(r.finish, FinishReason::Error) << "request " << out.size() << ": " << r.error;
    out.push_back(std::move(r.token_ids));
  }
  return out;
}

// The engine over `runner` with a pool of `kv` in blocks of 4 (6 sequences, 24 tokens a
// step), twice: a roomy pool of 256 blocks and one of 14 that must preempt; each time every
// prompt's n greedy tokens must be alone's.
inline void expect_batched_equals_alone(Runner& runner, const Tokenizer* tokenizer,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<std::vector<int32_t>>& alone, int64_t n,
                                        const KvFormat& kv, int64_t quant_start = 0,
                                        std::optional<DType> head_dtype = std::nullopt) {
  for (const int64_t num_blocks : {int64_t{256}, int64_t{14}}) {
    EngineConfig c;
    c.num_blocks = num_blocks;
    c.block_size = 4;
    c.scheduler = {6, 24};
    c.kv_format = kv;
    c.kv_quant_start = quant_start;
    c.kv_head_dtype = head_dtype;
    Engine engine(runner, tokenizer, c);
    const auto batched = engine_greedy(engine, prompts, n);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(batched[i], alone[i]) << kv_format_name(kv) << " request " << i << ", " << num_blocks << " blocks";
    if (num_blocks == 14) {
      EXPECT_GT(engine.stats().preemptions, 0);
    }
    engine.shutdown();
  }
}

}  // namespace corvid::fixtures
