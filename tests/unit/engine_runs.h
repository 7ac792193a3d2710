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

}  // namespace corvid::fixtures
