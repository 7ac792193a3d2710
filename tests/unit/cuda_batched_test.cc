// Batched serving on the GPU: ops::paged_attention's CUDA kernels against the CPU's,
// and Runner::forward_batch on the GPU (through the Scheduler, with prefix hits and
// preemption) against each prompt run alone on the CPU, and the engine on the GPU
// over sliding-window fixtures long past their window (the sliding groups' released
// blocks, recorded decode steps over two block-table groups). Skips without a GPU.
//
// Tolerances:
// - paged attention, Exact numerics: relative error <= 1e-5 (fp32 throughout, only
//   the summation order differs); Fast: prefill chunks of 16+ queries run the
//   tensor-core kernel (bf16 q/k/v/probabilities), relative error <= 2e-2, decode rows
//   stay fp32 (1e-5).
// - forward_batch, Exact: every logit within 1e-3 of the CPU's alone, greedy identical
//   (as CudaTinyParity); Fast: within 0.3 (bf16 GEMM operands, as CudaTinyParity).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "batch_trace_util.h"
#include "engine_runs.h"
#include "corvid/core/device.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "cuda_tolerances.h"
#include "fixture_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using namespace corvid::testing;

struct PagedCase {
  int64_t heads, kv_heads, head_dim, block_size, window;
};

// Sequences of several lengths, each with a run of queries at its end: one decode
// query, a 3-query append and a 40-query prefill chunk (tensor-core sized), in an
// interleaved order, over shuffled blocks of a shared pool.
void check_paged_matches_cpu(const PagedCase& c, ops::QuantizedMatmul mode, DType kv_dtype = DType::F32) {
  NumericsScope numerics(mode);
  struct Seq {
    int64_t length, queries;
  };
  const std::vector<Seq> seqs = {{700, 1}, {45, 40}, {9, 3}, {1, 1}, {300, 1}, {130, 40}, {64, 16}};
  const int64_t bs = c.block_size;
  int64_t max_blocks = 0;
  for (const Seq& s : seqs) max_blocks = std::max(max_blocks, (s.length + bs - 1) / bs);
  const int64_t num_blocks = static_cast<int64_t>(seqs.size()) * max_blocks + 5;
  std::mt19937 rng(static_cast<uint32_t>(c.head_dim * 31 + bs));
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> tables(seqs.size() * static_cast<size_t>(max_blocks), 0), query_seq, positions;
  size_t next = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int64_t b = 0; b * bs < seqs[s].length; ++b) tables[s * static_cast<size_t>(max_blocks) + b] = ids[next++];
    for (int64_t p = seqs[s].length - seqs[s].queries; p < seqs[s].length; ++p) {
      query_seq.push_back(static_cast<int32_t>(s));
      positions.push_back(static_cast<int32_t>(p));
    }
  }
  const int64_t n = static_cast<int64_t>(positions.size()), rows = num_blocks * bs;
  OwnedTensor k_pool = f32_tensor({rows, c.kv_heads, c.head_dim},
                                  random_floats(static_cast<size_t>(rows * c.kv_heads * c.head_dim), 11));
  OwnedTensor v_pool = f32_tensor({rows, c.kv_heads, c.head_dim},
                                  random_floats(static_cast<size_t>(rows * c.kv_heads * c.head_dim), 12));
  OwnedTensor q = f32_tensor({n, c.heads, c.head_dim}, random_floats(static_cast<size_t>(n * c.heads * c.head_dim), 13));
  DeviceTensor gk = kv_to_gpu(k_pool, kv_dtype), gv = kv_to_gpu(v_pool, kv_dtype), gq = to_gpu(q.tensor);
  OwnedTensor want(DType::F32, {n, c.heads, c.head_dim});
  const ops::PagedKV paged{bs, tables, max_blocks, query_seq};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  ops::paged_attention(q.tensor, k_pool.tensor, v_pool.tensor, paged, positions, scale, c.window, want.tensor);

  DeviceTensor gout(Device::CUDA, DType::F32, {n, c.heads, c.head_dim});
  ops::paged_attention(gq.tensor, gk.tensor, gv.tensor, paged, positions, scale, c.window, gout.tensor);
  const std::vector<float> got = to_host(gout.tensor);

  const size_t row = static_cast<size_t>(c.heads * c.head_dim);
  for (int64_t i = 0, first = 0; i < n; ++i) {
    const Seq& s = seqs[static_cast<size_t>(query_seq[static_cast<size_t>(i)])];
    if (i > 0 && query_seq[static_cast<size_t>(i)] != query_seq[static_cast<size_t>(i - 1)]) first = i;
    const bool tensor_cores = mode == ops::QuantizedMatmul::Fast && s.queries >= 16;
    const std::vector<float> got_row(got.begin() + static_cast<std::ptrdiff_t>(i * row),
                                     got.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
    EXPECT_LE(rel_err(got_row, want.ptr<float>() + i * static_cast<int64_t>(row), row), tensor_cores ? 2e-2 : 1e-5)
        << "query " << i << " (sequence " << query_seq[static_cast<size_t>(i)] << ", position "
        << positions[static_cast<size_t>(i)] << ", chunk from query " << first << "), head_dim " << c.head_dim
        << ", block " << bs << ", window " << c.window << ", cache " << dtype_name(kv_dtype);
  }
}

TEST(CudaPagedAttention, MatchesCpuInBothNumerics) {
  SKIP_WITHOUT_GPU();
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
    check_paged_matches_cpu({8, 2, 64, 16, 0}, mode);
    check_paged_matches_cpu({32, 8, 128, 16, 0}, mode);
    check_paged_matches_cpu({4, 4, 32, 4, 0}, mode);    // MHA, fp32 kernels only (head_dim 32)
    check_paged_matches_cpu({8, 2, 64, 32, 100}, mode);  // sliding window
    check_paged_matches_cpu({32, 8, 128, 16, 0}, mode, DType::BF16);  // 16-bit pools
    check_paged_matches_cpu({8, 2, 64, 32, 100}, mode, DType::F16);
    check_paged_matches_cpu({4, 4, 32, 4, 0}, mode, DType::BF16);
    check_paged_matches_cpu({8, 8, 96, 16, 0}, mode, DType::BF16);   // Phi-3's heads
    check_paged_matches_cpu({8, 2, 512, 16, 0}, mode, DType::BF16);  // Gemma 4's full layers
    check_paged_matches_cpu({8, 2, 256, 16, 100}, mode, DType::BF16);  // and its sliding ones
  }
}

class CudaBatchedForward : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBatchedForward, MatchesEachSequenceAloneOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::string path = (fixtures::fixtures_dir() / GetParam()).string();
  LoadedModel cpu = LoadedModel::load(path);
  LoadedModel gpu = LoadedModel::load(path, Device::CUDA);
  const auto prompts = test_prompts(cpu.model->config().vocab_size, 6, 5);
  const int64_t n_new = 12;
  std::vector<Trace> alone;
  for (const auto& p : prompts) alone.push_back(run_alone(*cpu.runner, p, n_new));
  double largest = 0;
  for (const Trace& t : alone)
    for (const auto& row : t.logits)
      for (float x : row) largest = std::max(largest, std::abs(static_cast<double>(x)));
  const double fast_atol = testing::fast_logit_atol(GetParam(), largest);
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast}) {
    NumericsScope numerics(mode);
    const bool exact = mode == ops::QuantizedMatmul::Exact;
    int64_t preemptions = 0;
    // A roomy pool with a small token budget (prefill chunks beside decode tokens), then
    // a pool too small for everyone (preemption by recompute).
    for (const auto& [config, blocks] : {std::pair{SchedulerConfig{4, 16}, int64_t{256}},
                                         std::pair{SchedulerConfig{6, 64}, int64_t{26}}}) {
      const std::vector<Trace> batched = run_batched(*gpu.runner, prompts, n_new, config, 4, blocks, &preemptions);
      ASSERT_EQ(batched.size(), alone.size());
      for (size_t s = 0; s < alone.size(); ++s) {
        if (exact) {
          EXPECT_EQ(batched[s].tokens, alone[s].tokens) << "sequence " << s << ", pool " << blocks;
        }
        // Compare the logits as long as both ran the same tokens.
        for (size_t t = 0; t < std::min(batched[s].logits.size(), alone[s].logits.size()); ++t) {
          double worst = 0;
          for (size_t v = 0; v < alone[s].logits[t].size(); ++v)
            worst = std::max(worst, std::abs(static_cast<double>(batched[s].logits[t][v]) - alone[s].logits[t][v]));
          EXPECT_LE(worst, exact ? 1e-3 : fast_atol) << (exact ? "exact" : "fast") << " sequence " << s << " step " << t
                                               << ", pool " << blocks;
          if (batched[s].tokens[t] != alone[s].tokens[t]) break;
        }
      }
    }
    EXPECT_GT(preemptions, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBatchedForward, ::testing::ValuesIn(fixtures::tiny_fixtures()),
                         [](const auto& param_info) { return fixtures::test_name(param_info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaBatchedForward);

class CudaSlidingEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSlidingEngine, LongGenerationsMatchTheCpuAndHoldOnlyTheWindow) {
  SKIP_WITHOUT_GPU();
  const std::string path = (fixtures::fixtures_dir() / GetParam()).string();
  LoadedModel cpu = LoadedModel::load(path);
  LoadedModel gpu = LoadedModel::load(path, Device::CUDA);
  NumericsScope numerics(ops::QuantizedMatmul::Exact);
  const auto prompts = test_prompts(cpu.model->config().vocab_size, 5, 9);
  const int64_t n_new = 100;
  EngineConfig config;
  config.num_blocks = 160;
  config.block_size = 4;
  config.scheduler = {8, 32};
  Engine engine(*gpu.runner, nullptr, config);
  const auto batched = fixtures::engine_greedy(engine, prompts, n_new);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(batched[i], run_alone(*cpu.runner, prompts[i], n_new).tokens) << "sequence " << i;
  engine.shutdown();
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.blocks_used, 0);
  for (const KvGroupStats& g : s.kv_groups) {
    if (g.window > 0) {  // the window, or one 32-token chunk next to it
      EXPECT_LE(g.peak_blocks_per_sequence, KvManager::sliding_blocks_for_chunk(g.window, 32, 4)) << g.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSlidingEngine,
                         ::testing::Values("gemma3", "gemma4", "gemma4_wide", "mistral_swa", "qwen2_swa"));

}  // namespace
}  // namespace corvid
