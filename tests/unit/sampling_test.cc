// ops::sample_tokens on the CPU: greedy and its ties, the kept sets of top-k / top-p /
// min-p against an independent oracle, the draw's token-id walk, penalties equal to
// Sampler's, frequencies, NaN handling and argument checks; and that Sampler is the
// same filtering code with its own RNG's uniform.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "corvid/core/error.h"
#include "corvid/engine/sampler.h"
#include "corvid/ops/cpu/sampling.h"
#include "corvid/ops/sampling.h"
#include "sampling_test_util.h"

namespace corvid {
namespace {

using testing::kept_set;
using testing::midpoints;
using testing::model_like_logits;

int32_t sample_one(const std::vector<float>& logits, const ops::TokenSampling& p) {
  Tensor t(DType::F32, {1, static_cast<int64_t>(logits.size())}, const_cast<float*>(logits.data()));
  int32_t out = -1;
  ops::sample_tokens(t, std::span<const ops::TokenSampling>(&p, 1), std::span<int32_t>(&out, 1));
  return out;
}

ops::TokenSampling sampling(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
  ops::TokenSampling p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

TEST(SampleTokens, GreedyIsArgmaxWithTheLowestIdOnTiesAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample_one({0.1f, 2.0f, 2.0f, -1.0f}, sampling(0)), 1);
  EXPECT_EQ(sample_one({nan, -3.0f, nan, -1.0f}, sampling(0)), 3);
  EXPECT_EQ(sample_one({-0.0f, 0.0f}, sampling(0)), 0);  // -0 ties with +0
  EXPECT_EQ(sample_one({0.0f, -0.0f}, sampling(0)), 0);
  // Greedy never touches the uniform.
  ops::TokenSampling p = sampling(0);
  p.uniform = 0.99;
  EXPECT_EQ(sample_one({0.1f, 2.0f, 3.0f}, p), 2);
}

TEST(SampleTokens, TopKOneIsGreedy) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> l = model_like_logits(500, seed);
    ops::TokenSampling p = sampling(0.7f, 1);
    p.uniform = static_cast<double>(seed) / 20;
    EXPECT_EQ(sample_one(l, p), sample_one(l, sampling(0)));
  }
}

TEST(SampleTokens, KeptSetsAndTheTokenOrderWalkMatchTheOracle) {
  const std::vector<ops::TokenSampling> params = {
      sampling(1.0f),          sampling(0.8f, 40),        sampling(1.3f, 0, 0.9f),     sampling(1.0f, 0, 1.0f, 0.05f),
      sampling(0.6f, 50, 0.8f, 0.02f), sampling(1.0f, 5), sampling(1.0f, 0, 0.3f),     sampling(2.0f, 100, 0.95f),
  };
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const std::vector<float> l = model_like_logits(600, seed);
    for (const ops::TokenSampling& base : params) {
      const auto kept = kept_set(l, base);
      ASSERT_FALSE(kept.empty());
      // Every kept token is hit at the middle of its interval...
      for (const auto& [u, want] : midpoints(kept)) {
        ops::TokenSampling p = base;
        p.uniform = u;
        EXPECT_EQ(sample_one(l, p), want) << "seed " << seed << " top_k " << base.top_k << " top_p " << base.top_p
                                          << " min_p " << base.min_p << " u " << u;
      }
      // ...and nothing outside the kept set ever is.
      for (int i = 0; i < 200; ++i) {
        ops::TokenSampling p = base;
        p.uniform = i / 200.0;
        EXPECT_TRUE(kept.count(sample_one(l, p))) << "u " << p.uniform;
      }
    }
  }
}

TEST(SampleTokens, TiesAtTheCutGoToTheLowerIds) {
  // Five tokens tie at the top: top-k 3 keeps ids 1, 4, 6 (not 7, 9).
  std::vector<float> l(12, -5.0f);
  for (int id : {1, 4, 6, 7, 9}) l[static_cast<size_t>(id)] = 2.0f;
  std::set<int32_t> seen;
  for (int i = 0; i < 300; ++i) {
    ops::TokenSampling p = sampling(1.0f, 3);
    p.uniform = i / 300.0;
    seen.insert(sample_one(l, p));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{1, 4, 6}));
  // top-p 0.5 of five equal tokens (plus a negligible tail): the first three by id.
  seen.clear();
  for (int i = 0; i < 300; ++i) {
    ops::TokenSampling p = sampling(1.0f, 0, 0.5f);
    p.uniform = i / 300.0;
    seen.insert(sample_one(l, p));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{1, 4, 6}));
}

TEST(SampleTokens, FrequenciesOnAUniformGridFollowTheKeptProbabilities) {
  const std::vector<float> l = model_like_logits(300, 3);
  for (const ops::TokenSampling& base : {sampling(1.0f), sampling(0.9f, 20, 0.9f), sampling(1.0f, 0, 1.0f, 0.01f)}) {
    const auto kept = kept_set(l, base);
    const int n = 20000;
    std::map<int32_t, int> counts;
    for (int i = 0; i < n; ++i) {
      ops::TokenSampling p = base;
      p.uniform = (i + 0.5) / n;
      counts[sample_one(l, p)]++;
    }
    for (const auto& [id, prob] : kept) EXPECT_NEAR(counts[id] / double(n), prob, 1.5 / n) << "token " << id;
    for (const auto& [id, c] : counts) EXPECT_TRUE(kept.count(id)) << "token " << id << " drawn " << c << " times";
  }
}

TEST(SampleTokens, PenaltiesEqualTheSampler) {
  std::vector<float> l = model_like_logits(400, 9);
  const std::vector<int32_t> prompt = {5, 17, 17, 200, 399, 0};
  const std::vector<int32_t> output = {17, 42, 42, 42, 7, 5};
  for (uint64_t id : {5u, 17u, 42u, 7u}) l[id] = 7.5f;  // the penalties decide among these
  l[0] = -3.0f;
  SamplingParams sp;
  sp.repetition_penalty = 1.5f;
  sp.presence_penalty = 0.5f;
  sp.frequency_penalty = 0.25f;  // exact products: no rounding difference an FMA could make
  sp.temperature = 0.8f;
  sp.top_k = 30;
  sp.seed = 5;
  // Sampler's greedy run applies the penalties to a copy (temperature 0 rewrites nothing else).
  SamplingParams greedy = sp;
  greedy.temperature = 0.0f;
  std::vector<float> penalised = l;
  Sampler(greedy).sample(penalised, prompt, output);
  EXPECT_NE(penalised, l);

  Sampler s(sp);
  for (int i = 0; i < 100; ++i) {
    ops::TokenSampling with = s.next(prompt, output, static_cast<int64_t>(l.size()));
    ops::TokenSampling without = with;
    without.penalty_ids = {};
    without.output_counts = {};
    without.repetition_penalty = 1.0f;
    without.presence_penalty = without.frequency_penalty = 0.0f;
    EXPECT_EQ(sample_one(l, with), sample_one(penalised, without)) << "u " << with.uniform;
    with.temperature = 0.0f;
    without.temperature = 0.0f;
    EXPECT_EQ(sample_one(l, with), sample_one(penalised, without));
  }
  // Sparse list: distinct ids of prompt and output, output counts.
  PenaltyList list;
  list.build(prompt, output, 400, true);
  std::map<int32_t, int32_t> got;
  for (size_t j = 0; j < list.ids().size(); ++j) got[list.ids()[j]] = list.output_counts()[j];
  EXPECT_EQ(got, (std::map<int32_t, int32_t>{{0, 0}, {5, 1}, {7, 1}, {17, 1}, {42, 3}, {200, 0}, {399, 0}}));
  list.build(prompt, output, 400, false);  // only output tokens
  EXPECT_EQ(list.ids().size(), 4u);
}

TEST(SampleTokens, SamplerIsTheSameFilteringWithItsOwnUniform) {
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 50;
  sp.top_p = 0.9f;
  sp.min_p = 0.01f;
  sp.seed = 123;
  Sampler a(sp), b(sp);
  ops::cpu::SamplingScratch scratch;
  for (uint64_t step = 0; step < 50; ++step) {
    std::vector<float> l = model_like_logits(1000, step), copy = l;
    const int32_t want = a.sample(l, {}, {});
    const ops::TokenSampling p = b.next({}, {}, 1000);
    EXPECT_EQ(ops::cpu::pick_token(copy, p, ops::cpu::DrawOrder::Descending, scratch), want);
  }
  // Greedy draws nothing from the RNG.
  SamplingParams g;
  g.seed = 1;
  EXPECT_EQ(Sampler(g).next({}, {}, 10).uniform, 0.0);
}

TEST(SampleTokens, ManyRowsAndALargeVocabulary) {
  const int64_t vocab = 262144, rows = 3;
  std::vector<float> all;
  std::vector<ops::TokenSampling> params = {sampling(0), sampling(1.0f, 0, 0.95f), sampling(0.7f, 64, 1.0f, 0.1f)};
  for (int64_t r = 0; r < rows; ++r) {
    const auto l = model_like_logits(static_cast<size_t>(vocab), 100 + static_cast<uint64_t>(r));
    all.insert(all.end(), l.begin(), l.end());
    params[static_cast<size_t>(r)].uniform = 0.37;
  }
  std::vector<int32_t> out(rows);
  ops::sample_tokens(Tensor(DType::F32, {rows, vocab}, all.data()), params, out);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> l(all.begin() + r * vocab, all.begin() + (r + 1) * vocab);
    EXPECT_EQ(out[static_cast<size_t>(r)], sample_one(l, params[static_cast<size_t>(r)]));
    EXPECT_TRUE(kept_set(l, params[static_cast<size_t>(r)]).count(out[static_cast<size_t>(r)]));
  }
}

TEST(SampleTokens, AllNaNIsAnErrorAndNaNIsNeverDrawn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(sample_one({nan, nan}, sampling(0)), Error);
  EXPECT_THROW(sample_one({nan, nan}, sampling(1.0f)), Error);
  for (int i = 0; i < 50; ++i) {
    ops::TokenSampling p = sampling(1.0f);
    p.uniform = i / 50.0;
    const int32_t t = sample_one({nan, 0.0f, nan, 0.5f, nan}, p);
    EXPECT_TRUE(t == 1 || t == 3);
  }
}

TEST(SampleTokens, RejectsBadArguments) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f};
  auto bad = [&](ops::TokenSampling p) { EXPECT_THROW(sample_one(l, p), Error); };
  ops::TokenSampling p = sampling(1.0f);
  p.uniform = 1.0;
  bad(p);
  p.uniform = -0.1;
  bad(p);
  bad(sampling(-1.0f));
  bad(sampling(1.0f, -1));
  bad(sampling(1.0f, 0, 0.0f));
  bad(sampling(1.0f, 0, 1.0f, 1.5f));
  const std::vector<int32_t> dup = {1, 1}, counts = {0, 0}, outside = {3}, one = {0};
  p = sampling(1.0f);
  p.repetition_penalty = 1.2f;
  p.penalty_ids = dup;
  p.output_counts = counts;
  bad(p);
  p.penalty_ids = outside;
  p.output_counts = one;
  bad(p);
  p.penalty_ids = dup;
  p.output_counts = one;  // lengths differ
  bad(p);
  // Shapes: rows of parameters, outputs and logits must agree.
  std::vector<ops::TokenSampling> two(2);
  std::vector<int32_t> out(2);
  EXPECT_THROW(ops::sample_tokens(Tensor(DType::F32, {1, 3}, l.data()), two, out), Error);
}

}  // namespace
}  // namespace corvid
