// ops::sample_tokens on the GPU against the CPU op and an independent oracle:
// greedy and its ties, kept sets of top-k / top-p / min-p (every kept token hit at
// the middle of its CDF interval, nothing else ever drawn), penalties, frequencies
// on a uniform grid, the same token as the CPU op for the same uniform (both walk
// in token-id order) unless the uniform is within 1e-6 of a CDF boundary, large
// vocabularies and more rows than SMs, all-NaN rows; and seeded sampling through
// Session and Engine with the model on the GPU reproduces.
// Runs only in -DCORVID_CUDA=ON builds; skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/sampler.h"
#include "corvid/engine/session.h"
#include "corvid/ops/cpu/sampling.h"
#include "corvid/ops/sampling.h"
#include "cuda_test_util.h"
#include "fixture_util.h"
#include "sampling_test_util.h"

namespace corvid {
namespace {

using testing::kept_set;
using testing::midpoints;
using testing::model_like_logits;
using testing::near_boundary;

// Samples rows (each `vocab` wide, concatenated) on the given device.
std::vector<int32_t> sample_on(Device device, const std::vector<float>& rows, int64_t vocab,
                               const std::vector<ops::TokenSampling>& params) {
  const int64_t n = static_cast<int64_t>(params.size());
  Tensor host(DType::F32, {n, vocab}, const_cast<float*>(rows.data()));
  std::vector<int32_t> out(params.size(), -7);
  if (device == Device::CPU) {
    ops::sample_tokens(host, params, out);
  } else {
    DeviceTensor d = testing::to_gpu(host);
    ops::sample_tokens(d.tensor, params, out);
  }
  return out;
}

// The same logits row repeated once per parameter set.
std::vector<float> repeat(const std::vector<float>& row, size_t times) {
  std::vector<float> all;
  for (size_t i = 0; i < times; ++i) all.insert(all.end(), row.begin(), row.end());
  return all;
}

ops::TokenSampling sampling(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                            double uniform = 0.0) {
  ops::TokenSampling p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.uniform = uniform;
  return p;
}

const std::vector<ops::TokenSampling> kFilters = {
    sampling(1.0f),          sampling(0.8f, 40),         sampling(1.3f, 0, 0.9f),   sampling(1.0f, 0, 1.0f, 0.05f),
    sampling(0.6f, 50, 0.8f, 0.02f), sampling(1.0f, 5), sampling(1.0f, 0, 0.3f),   sampling(2.0f, 100, 0.95f),
    sampling(1.0f, 3000, 0.99f), sampling(0.5f, 0, 0.5f, 0.001f)};

TEST(CudaSampling, GreedyIsArgmaxWithTheLowestIdOnTiesAndSkipsNaN) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample_on(Device::CUDA, {0.1f, 2.0f, 2.0f, -1.0f}, 4, {sampling(0)})[0], 1);
  EXPECT_EQ(sample_on(Device::CUDA, {nan, -3.0f, nan, -1.0f}, 4, {sampling(0)})[0], 3);
  EXPECT_EQ(sample_on(Device::CUDA, {-0.0f, 0.0f}, 2, {sampling(0)})[0], 0);
  EXPECT_EQ(sample_on(Device::CUDA, {0.0f, -0.0f}, 2, {sampling(0)})[0], 0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample_on(Device::CUDA, {1.0f, inf, 3.0f, inf}, 4, {sampling(1.0f, 0, 1.0f, 0.0f, 0.9)})[0], 1);
  // Large rows with the maximum tied across several ids, far apart.
  for (uint64_t seed = 0; seed < 10; ++seed) {
    std::vector<float> l = model_like_logits(100000, seed);
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(static_cast<int32_t>(rng() % l.size()));
    for (int32_t id : ids) l[static_cast<size_t>(id)] = 20.0f;
    const int32_t want = *std::min_element(ids.begin(), ids.end());
    const auto got = sample_on(Device::CUDA, repeat(l, 2), 100000, {sampling(0), sampling(0.7f, 1, 1.0f, 0.0f, 0.8)});
    EXPECT_EQ(got[0], want);
    EXPECT_EQ(got[1], want);  // top-k 1 is greedy
  }
}

TEST(CudaSampling, KeptSetsAndTheTokenOrderWalkMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 5000;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const std::vector<float> l = model_like_logits(static_cast<size_t>(vocab), seed);
    for (const ops::TokenSampling& base : kFilters) {
      const auto kept = kept_set(l, base);
      // Every kept token at the middle of its interval, in one launch (a row each).
      std::vector<ops::TokenSampling> params;
      std::vector<int32_t> want;
      for (const auto& [u, id] : midpoints(kept)) {
        params.push_back(base);
        params.back().uniform = u;
        want.push_back(id);
      }
      // And a grid of uniforms, whose tokens must all be kept.
      const size_t grid_begin = params.size();
      for (int i = 0; i < 256; ++i) {
        params.push_back(base);
        params.back().uniform = i / 256.0;
      }
      const auto got = sample_on(Device::CUDA, repeat(l, params.size()), vocab, params);
      size_t wrong = 0;
      for (size_t i = 0; i < grid_begin; ++i) wrong += got[i] != want[i];
      EXPECT_EQ(wrong, 0u) << "seed " << seed << " top_k " << base.top_k << " top_p " << base.top_p << " min_p "
                           << base.min_p << ": " << wrong << " of " << grid_begin << " kept tokens missed";
      for (size_t i = grid_begin; i < params.size(); ++i)
        EXPECT_TRUE(kept.count(got[i])) << "u " << params[i].uniform << " drew " << got[i];
    }
  }
}

TEST(CudaSampling, TiesAtTheCutGoToTheLowerIds) {
  SKIP_WITHOUT_GPU();
  // Seven tokens tie at the top, spread over the row (different threads' runs).
  const int64_t vocab = 70000;
  std::vector<float> l(static_cast<size_t>(vocab), -20.0f);  // a tail of ~2e-5 in all
  const std::vector<int32_t> tied = {3, 999, 20000, 20001, 41000, 55555, 69999};
  for (int32_t id : tied) l[static_cast<size_t>(id)] = 2.0f;
  for (const ops::TokenSampling& base : {sampling(1.0f, 3), sampling(1.0f, 0, 0.4f), sampling(1.0f, 5, 0.5f)}) {
    std::vector<ops::TokenSampling> params;
    for (int i = 0; i < 500; ++i) params.push_back(base), params.back().uniform = i / 500.0;
    const auto got = sample_on(Device::CUDA, repeat(l, params.size()), vocab, params);
    const auto want = kept_set(l, base);
    std::set<int32_t> seen(got.begin(), got.end()), expected;
    for (const auto& [id, p] : want) expected.insert(id);
    EXPECT_EQ(seen, expected) << "top_k " << base.top_k << " top_p " << base.top_p;
    EXPECT_EQ(expected, (std::set<int32_t>{3, 999, 20000}));
  }
}

TEST(CudaSampling, SameTokenAsTheCpuOpForTheSameUniformIncludingPenalties) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 32000;
  std::mt19937_64 rng(77);
  std::vector<float> rows;
  std::vector<ops::TokenSampling> params;
  std::vector<std::vector<int32_t>> ids(300), counts(300);
  for (size_t r = 0; r < 300; ++r) {
    const auto l = model_like_logits(static_cast<size_t>(vocab), 1000 + r);
    rows.insert(rows.end(), l.begin(), l.end());
    ops::TokenSampling p = kFilters[r % kFilters.size()];
    p.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    if (r % 3 == 0) {  // penalties on a third of the rows; some listed tokens are the top ones
      std::set<int32_t> chosen;
      while (chosen.size() < 60) chosen.insert(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
      for (int32_t id : chosen) {
        ids[r].push_back(id);
        counts[r].push_back(static_cast<int32_t>(rng() % 4));
      }
      p.repetition_penalty = 1.3f;
      p.presence_penalty = 0.5f;
      p.frequency_penalty = 0.25f;
      p.penalty_ids = ids[r];
      p.output_counts = counts[r];
    }
    if (r % 10 == 0) p.temperature = 0.0f;
    params.push_back(p);
  }
  const auto gpu = sample_on(Device::CUDA, rows, vocab, params);
  const auto cpu = sample_on(Device::CPU, rows, vocab, params);
  int differ = 0, near = 0;
  for (size_t r = 0; r < params.size(); ++r) {
    if (gpu[r] == cpu[r]) continue;
    // Only a uniform at a CDF boundary may round differently: check with the oracle
    // on the CPU-penalised row.
    std::vector<float> l(rows.begin() + static_cast<int64_t>(r) * vocab, rows.begin() + static_cast<int64_t>(r + 1) * vocab);
    ops::cpu::apply_penalties(l, params[r]);
    const bool at_boundary = near_boundary(kept_set(l, params[r]), params[r].uniform);
    near += at_boundary;
    differ += !at_boundary;
    EXPECT_TRUE(at_boundary) << "row " << r << ": gpu " << gpu[r] << " cpu " << cpu[r] << " u " << params[r].uniform;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_LE(near, 3);
}

TEST(CudaSampling, PenaltiesEqualTheSamplers) {
  SKIP_WITHOUT_GPU();
  std::vector<float> l = model_like_logits(1000, 9);
  const std::vector<int32_t> prompt = {5, 17, 17, 200, 999, 0};
  const std::vector<int32_t> output = {17, 42, 42, 42, 7, 5};
  for (size_t id : {5u, 17u, 42u, 7u}) l[id] = 9.5f;  // the penalties decide among these
  l[0] = -3.0f;
  for (float rep : {1.0f, 1.5f, 0.7f}) {
    SamplingParams sp;
    sp.repetition_penalty = rep;
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = -0.75f;
    sp.seed = 3;
    std::vector<float> penalised = l;
    const int32_t cpu_greedy = Sampler(sp).sample(penalised, prompt, output);
    Sampler s(sp);
    const ops::TokenSampling greedy = s.next(prompt, output, 1000);
    EXPECT_EQ(sample_on(Device::CUDA, l, 1000, {greedy})[0], cpu_greedy) << "repetition " << rep;
    // Sampling too: the GPU on raw logits with the list = the GPU on CPU-penalised logits without.
    std::vector<ops::TokenSampling> with, without;
    for (int i = 0; i < 200; ++i) {
      ops::TokenSampling p = greedy;
      p.temperature = 0.9f;
      p.top_k = 20;
      p.uniform = i / 200.0;
      with.push_back(p);
      p.penalty_ids = {};
      p.output_counts = {};
      p.repetition_penalty = 1.0f;
      p.presence_penalty = p.frequency_penalty = 0.0f;
      without.push_back(p);
    }
    EXPECT_EQ(sample_on(Device::CUDA, repeat(l, 200), 1000, with),
              sample_on(Device::CUDA, repeat(penalised, 200), 1000, without))
        << "repetition " << rep;
  }
}

TEST(CudaSampling, FrequenciesOnAUniformGridFollowTheKeptProbabilities) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 400;
  const std::vector<float> l = model_like_logits(static_cast<size_t>(vocab), 3);
  for (const ops::TokenSampling& base : {sampling(1.0f), sampling(0.9f, 20, 0.9f), sampling(1.0f, 0, 1.0f, 0.01f)}) {
    const int n = 20000;
    std::vector<ops::TokenSampling> params(static_cast<size_t>(n), base);
    for (int i = 0; i < n; ++i) params[static_cast<size_t>(i)].uniform = (i + 0.5) / n;
    const auto got = sample_on(Device::CUDA, repeat(l, params.size()), vocab, params);
    std::map<int32_t, int> counts;
    for (int32_t t : got) counts[t]++;
    const auto kept = kept_set(l, base);
    for (const auto& [id, prob] : kept) EXPECT_NEAR(counts[id] / double(n), prob, 1.5 / n) << "token " << id;
    for (const auto& [id, c] : counts) EXPECT_TRUE(kept.count(id)) << "token " << id << " drawn " << c << " times";
  }
}

TEST(CudaSampling, LargeVocabulariesAndMoreRowsThanSMs) {
  SKIP_WITHOUT_GPU();
  for (int64_t vocab : {int64_t{262144}, int64_t{151936}}) {
    const size_t n = 40;
    std::vector<float> rows;
    std::vector<ops::TokenSampling> params;
    std::mt19937_64 rng(static_cast<uint64_t>(vocab));
    for (size_t r = 0; r < n; ++r) {
      const auto l = model_like_logits(static_cast<size_t>(vocab), 500 + r);
      rows.insert(rows.end(), l.begin(), l.end());
      params.push_back(kFilters[r % kFilters.size()]);
      params.back().uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    }
    const auto gpu = sample_on(Device::CUDA, rows, vocab, params);
    const auto cpu = sample_on(Device::CPU, rows, vocab, params);
    for (size_t r = 0; r < n; ++r) {
      if (gpu[r] == cpu[r]) continue;
      const std::vector<float> l(rows.begin() + static_cast<int64_t>(r) * vocab,
                                 rows.begin() + static_cast<int64_t>(r + 1) * vocab);
      EXPECT_TRUE(near_boundary(kept_set(l, params[r]), params[r].uniform))
          << "vocab " << vocab << " row " << r << ": gpu " << gpu[r] << " cpu " << cpu[r];
    }
  }
  // Many more rows than SMs (each block loops over rows), small vocabulary.
  const int64_t vocab = 1000;
  const auto l = model_like_logits(static_cast<size_t>(vocab), 4);
  std::vector<ops::TokenSampling> params;
  for (int i = 0; i < 2000; ++i) params.push_back(kFilters[static_cast<size_t>(i) % kFilters.size()]), params.back().uniform = (i % 97) / 97.0;
  const auto all = repeat(l, params.size());
  const auto gpu = sample_on(Device::CUDA, all, vocab, params);
  const auto cpu = sample_on(Device::CPU, all, vocab, params);
  int differ = 0;
  for (size_t i = 0; i < params.size(); ++i) differ += gpu[i] != cpu[i] && !near_boundary(kept_set(l, params[i]), params[i].uniform);
  EXPECT_EQ(differ, 0);
}

// Not a check: how long a batched decode step's sampling takes (printed for the record).
TEST(CudaSampling, TimingOfABatchOfLlama3Rows) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 128256;
  for (size_t rows : {size_t{1}, size_t{32}, size_t{256}}) {
    std::vector<float> all;
    for (size_t r = 0; r < std::min<size_t>(rows, 8); ++r) {
      const auto l = model_like_logits(static_cast<size_t>(vocab), 900 + r);
      all.insert(all.end(), l.begin(), l.end());
    }
    all = repeat(std::vector<float>(all.begin(), all.end()), (rows + 7) / 8);
    all.resize(rows * static_cast<size_t>(vocab));
    DeviceTensor d = testing::to_gpu(Tensor(DType::F32, {static_cast<int64_t>(rows), vocab}, all.data()));
    for (const ops::TokenSampling& base : {sampling(0), sampling(0.7f, 0, 0.9f), sampling(0.8f, 50, 0.95f, 0.05f)}) {
      std::vector<ops::TokenSampling> params(rows, base);
      std::vector<int32_t> out(rows);
      ops::sample_tokens(d.tensor, params, out);  // warm-up (scratch, uploads)
      const auto t0 = std::chrono::steady_clock::now();
      const int reps = 10;
      for (int i = 0; i < reps; ++i) ops::sample_tokens(d.tensor, params, out);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("cuda sample_tokens vocab %lld x %zu rows, temperature %.1f top_k %d top_p %.2f min_p %.2f: %.3f ms\n",
                  static_cast<long long>(vocab), rows, base.temperature, base.top_k, base.top_p, base.min_p, ms);
    }
  }
}

TEST(CudaSampling, AllNaNRowIsAnErrorAndNaNIsNeverDrawn) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> rows = {0.0f, 1.0f, 2.0f, nan, nan, nan};
  try {
    sample_on(Device::CUDA, rows, 3, {sampling(1.0f), sampling(1.0f)});
    ADD_FAILURE() << "no error for a row of NaN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1: all logits are NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sample_on(Device::CUDA, {nan, nan}, 2, {sampling(0)}), Error);
  std::vector<float> l(5000, nan);
  for (size_t i = 1; i < l.size(); i += 7) l[i] = static_cast<float>(i % 13) * 0.1f;
  std::vector<ops::TokenSampling> params;
  for (int i = 0; i < 100; ++i) params.push_back(sampling(1.0f, i % 3 ? 0 : 50, 0.9f, 0.0f, i / 100.0));
  for (int32_t t : sample_on(Device::CUDA, repeat(l, params.size()), 5000, params)) EXPECT_FALSE(std::isnan(l[static_cast<size_t>(t)]));
  // The device is still usable after the error.
  EXPECT_EQ(sample_on(Device::CUDA, {0.0f, 5.0f}, 2, {sampling(0)})[0], 1);
}

std::vector<int32_t> session_run(Runner& model, const SamplingParams& sp) {
  Session s(model, 128);
  GenerateOptions opts;
  opts.max_new_tokens = 24;
  opts.sampling = sp;
  std::vector<int32_t> out;
  const std::vector<int32_t> prompt = {1, 20, 30, 40};
  s.generate(prompt, opts, [&](int32_t id) { out.push_back(id); return true; });
  return out;
}

TEST(CudaSampling, SeededSessionOnTheGpuReproduces) {
  SKIP_WITHOUT_GPU();
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string(), Device::CUDA);
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.repetition_penalty = 1.1f;
  sp.seed = 42;
  const auto a = session_run(*m.runner, sp), b = session_run(*m.runner, sp);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 24u);
  sp.seed = 43;
  EXPECT_NE(session_run(*m.runner, sp), a);  // really sampling
}

TEST(CudaSampling, SeededEngineOnTheGpuReproducesWithLogprobs) {
  SKIP_WITHOUT_GPU();
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string(), Device::CUDA);
  auto run = [&](uint64_t seed) {
    EngineConfig c;
    c.num_blocks = 256;
    c.block_size = 4;
    Engine engine(*m.runner, m.tokenizer.get(), c);
    std::vector<RequestHandle> handles;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest r;
      r.prompt = {1, static_cast<int32_t>(20 + i), 30, 40};
      r.max_tokens = 16;
      r.ignore_eos = true;
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.presence_penalty = 0.3f;
      r.sampling.seed = seed + static_cast<uint64_t>(i);
      r.logprobs = i == 1;
      r.top_logprobs = i == 1 ? 2 : 0;
      handles.push_back(engine.submit(r));
    }
    std::vector<RequestResult> results;
    for (RequestHandle& h : handles) results.push_back(h.wait());
    return results;
  };
  const auto a = run(7), b = run(7);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].finish, FinishReason::Length) << a[i].error;
    EXPECT_EQ(a[i].token_ids, b[i].token_ids) << "request " << i;
    EXPECT_EQ(a[i].token_ids.size(), 16u);
  }
  ASSERT_EQ(a[1].logprobs.size(), 16u);
  for (size_t t = 0; t < 16; ++t) {
    EXPECT_LT(a[1].logprobs[t], 0.0f);
    ASSERT_EQ(a[1].top_logprobs[t].size(), 2u);
    EXPECT_GE(a[1].top_logprobs[t][0].logprob, a[1].logprobs[t]);  // the top one is at least as likely
  }
}

}  // namespace
}  // namespace corvid
