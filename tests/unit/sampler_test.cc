#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "corvid/core/error.h"
#include "corvid/engine/sampler.h"

namespace corvid {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  auto l = logits_of({0.1f, 2.0f, 2.0f, -1.0f});
  EXPECT_EQ(s.sample(l, {}, {}), 1);
}

TEST(Sampler, SeedReproduces) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<int32_t> a, b;
  Sampler s1(p), s2(p);
  for (int i = 0; i < 200; ++i) {
    auto l1 = logits_of({0.0f, 0.5f, 1.0f, 1.5f, 0.2f});
    auto l2 = l1;
    a.push_back(s1.sample(l1, {}, {}));
    b.push_back(s2.sample(l2, {}, {}));
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 2u);  // really sampling
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = logits_of({0.0f, std::log(3.0f)});  // probabilities 1/4, 3/4
    counts[s.sample(l, {}, {})]++;
  }
  EXPECT_NEAR(counts[1] / double(n), 0.75, 0.015);
}

TEST(Sampler, TopKTopPMinPCutTheTail) {
  auto only = [](SamplingParams p, std::vector<float> base) {
    p.temperature = 1.0f;
    p.seed = 1;
    Sampler s(p);
    std::set<int32_t> seen;
    for (int i = 0; i < 2000; ++i) {
      auto l = base;
      seen.insert(s.sample(l, {}, {}));
    }
    return seen;
  };
  // probabilities ~ 0.5, 0.25, 0.125, 0.125
  std::vector<float> base = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  SamplingParams k;
  k.top_k = 2;
  EXPECT_EQ(only(k, base), (std::set<int32_t>{0, 1}));
  SamplingParams p;
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.75: two tokens
  EXPECT_EQ(only(p, base), (std::set<int32_t>{0, 1}));
  SamplingParams m;
  m.min_p = 0.3f;  // floor 0.15: tokens 2 and 3 (0.125) go
  EXPECT_EQ(only(m, base), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, PenaltiesChangeTheChoice) {
  SamplingParams rep;
  rep.repetition_penalty = 2.0f;
  Sampler s(rep);
  auto l = logits_of({3.0f, 2.0f, -1.0f});
  std::vector<int32_t> prompt = {0, 0, 2};
  EXPECT_EQ(s.sample(l, prompt, {}), 1);  // 3/2 = 1.5 < 2
  EXPECT_FLOAT_EQ(l[0], 1.5f);            // penalised once despite two occurrences
  EXPECT_FLOAT_EQ(l[2], -2.0f);           // negative logits are multiplied

  SamplingParams freq;
  freq.frequency_penalty = 0.6f;
  freq.presence_penalty = 0.5f;
  Sampler f(freq);
  auto l2 = logits_of({3.0f, 2.0f});
  std::vector<int32_t> output = {0, 0};
  EXPECT_EQ(f.sample(l2, {}, output), 1);
  EXPECT_FLOAT_EQ(l2[0], 3.0f - 0.5f - 1.2f);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.presence_penalty = 3.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace corvid
