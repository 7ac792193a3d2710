// The ops that produce a prompt GEMM's input on the GPU — RMSNorm (with or without the
// residual add), silu_mul, tensor-core prefill attention — also write it as the GEMM's
// 16-bit operand (ops/cuda/context.h GemmOperand), and a GEMM that runs as the very next
// op takes it instead of rounding x itself; a GEMM passes the operand on to the next
// GEMM of the same x (q, k and v). The producers round the F32 values they store exactly
// as the GEMM's rounding kernel does, so results must be bit-identical to the unfused
// path, forced here by an unrelated op between producer and GEMM (after which the GEMM
// must round x itself: a stale operand would be wrong). Producers write bf16 or f16
// as the last prompt GEMM took; a GEMM of the other type must not take it.
#include <gtest/gtest.h>

#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/env.h"
#include "corvid/ops/cuda/gemm_tc.cuh"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::make_weight;
using testing::mismatches;
using testing::NumericsScope;
using testing::Producer;
using testing::producer_name;
using testing::random_floats;
using testing::to_gpu;
using testing::to_host;

DeviceTensor gpu_weight(DType t, int64_t m, int64_t k, uint32_t seed) {
  OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), seed));
  DeviceTensor raw = to_gpu(w.tensor);
  const DType dt = ops::device_weight_dtype(w.tensor, Device::CUDA);
  if (dt == t) return raw;
  DeviceTensor gw(Device::CUDA, dt, {m, k});
  ops::rearrange_weight(raw.tensor, gw.tensor);
  return gw;
}

TEST(CudaFusedOperand, ProducerOperandEqualsTheGemmRounding) {
  SKIP_WITHOUT_GPU();
  NumericsScope scope(ops::QuantizedMatmul::Fast);
  if (env_flag("CORVID_NO_FUSED_OPERAND")) GTEST_SKIP() << "CORVID_NO_FUSED_OPERAND is set";
  const int64_t heads = 32, kv_heads = 8, head_dim = 128, cache_rows = 512;
  const int64_t m = 1000, m2 = 264, k = heads * head_dim;
  OwnedTensor norm_w = f32_tensor({k}, random_floats(static_cast<size_t>(k), 602));
  DeviceTensor g_norm_w = to_gpu(norm_w.tensor);
  OwnedTensor spare = f32_tensor({64}, random_floats(64, 603));
  DeviceTensor g_spare_a = to_gpu(spare.tensor), g_spare_b = to_gpu(spare.tensor);
  const size_t cache_values = static_cast<size_t>(cache_rows * kv_heads * head_dim);
  DeviceTensor g_keys = to_gpu(f32_tensor({cache_rows, kv_heads, head_dim}, random_floats(cache_values, 606)).tensor);
  DeviceTensor g_values = to_gpu(f32_tensor({cache_rows, kv_heads, head_dim}, random_floats(cache_values, 607)).tensor);
  for (DType wt : {DType::BF16, DType::F16, DType::Q4_0}) {
    DeviceTensor gw = gpu_weight(wt, m, k, 601), gw2 = gpu_weight(wt, m2, k, 608);
    // 40 rows: the cluster RMSNorm; 200: the row-per-block kernels and prefill attention.
    for (int n : {40, 200}) {
      const size_t count = static_cast<size_t>(n * k);
      const auto xv = random_floats(count, 604), yv = random_floats(count, 605);
      OwnedTensor x = f32_tensor({n, k}, xv), y = f32_tensor({n, k}, yv);
      DeviceTensor gy = to_gpu(y.tensor), g_out(Device::CUDA, DType::F32, {n, k});
      DeviceTensor g_res(Device::CUDA, DType::F32, {n, m}), g_res2(Device::CUDA, DType::F32, {n, m2});
      std::vector<int32_t> positions;
      for (int t = 0; t < n; ++t) positions.push_back(300 + t);
      for (Producer p : {Producer::RmsNorm, Producer::AddRmsNorm, Producer::SiluMul, Producer::Attention}) {
        std::vector<float> results[2], second[2];
        for (int unfused = 0; unfused < 2; ++unfused) {
          DeviceTensor gx = to_gpu(x.tensor);  // add_rms_norm adds into x: start from the same values
          // The last prompt GEMM sets the operand type producers write: this weight's.
          ops::matmul(gy.tensor, gw2.tensor, g_res2.tensor);
          if (p == Producer::RmsNorm) ops::rms_norm(gx.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
          if (p == Producer::AddRmsNorm) ops::add_rms_norm(gx.tensor, gy.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
          if (p == Producer::SiluMul) ops::silu_mul(gx.tensor, gy.tensor, g_out.tensor);
          if (p == Producer::Attention) {
            ops::attention(gx.tensor.reshaped({n, heads, head_dim}), g_keys.tensor, g_values.tensor, positions,
                           0.088f, 0, g_out.tensor.reshaped({n, heads, head_dim}));
          }
          if (unfused) ops::add(g_spare_a.tensor, g_spare_b.tensor);
          const uint64_t before = ops::cuda::gemm_operand_reuses();
          ops::matmul(g_out.tensor, gw.tensor, g_res.tensor);
          ops::matmul(g_out.tensor, gw2.tensor, g_res2.tensor);  // the same x again: passed on
          EXPECT_EQ(ops::cuda::gemm_operand_reuses() - before, unfused ? 1u : 2u)
              << producer_name(p) << " " << dtype_name(wt) << " n=" << n;
          results[unfused] = to_host(g_res.tensor);
          second[unfused] = to_host(g_res2.tensor);
        }
        EXPECT_EQ(mismatches(results[0], results[1]), 0u) << producer_name(p) << " " << dtype_name(wt) << " n=" << n;
        EXPECT_EQ(mismatches(second[0], second[1]), 0u) << producer_name(p) << " " << dtype_name(wt) << " n=" << n;
      }
      // The producer's output overwritten by a copy before the GEMM: the operand is stale
      // now, and the GEMM must round the new values (as it does for y uploaded afresh).
      ops::silu_mul(to_gpu(x.tensor).tensor, gy.tensor, g_out.tensor);
      copy_tensor(g_out.tensor, y.tensor);
      ops::matmul(g_out.tensor, gw.tensor, g_res.tensor);
      const auto after_copy = to_host(g_res.tensor);
      ops::matmul(gy.tensor, gw.tensor, g_res.tensor);
      EXPECT_EQ(mismatches(after_copy, to_host(g_res.tensor)), 0u)
          << "output overwritten after silu_mul, " << dtype_name(wt) << " n=" << n;
    }
  }
  // An operand of the other type: bf16 written after a BF16 GEMM, then read by an F16
  // GEMM, which must round x to f16 itself.
  const int n = 64;
  DeviceTensor g16 = gpu_weight(DType::F16, m, k, 609), gq = gpu_weight(DType::BF16, m2, k, 610);
  DeviceTensor gx = to_gpu(f32_tensor({n, k}, random_floats(static_cast<size_t>(n * k), 611)).tensor);
  DeviceTensor g_out(Device::CUDA, DType::F32, {n, k}), g_res(Device::CUDA, DType::F32, {n, m});
  DeviceTensor g_res2(Device::CUDA, DType::F32, {n, m2});
  ops::matmul(gx.tensor, gq.tensor, g_res2.tensor);
  ops::rms_norm(gx.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
  const uint64_t before = ops::cuda::gemm_operand_reuses();
  ops::matmul(g_out.tensor, g16.tensor, g_res.tensor);
  EXPECT_EQ(ops::cuda::gemm_operand_reuses(), before);
  const auto mixed = to_host(g_res.tensor);
  DeviceTensor g_copy = to_gpu(testing::f32_tensor({n, k}, to_host(g_out.tensor)).tensor);
  ops::matmul(g_copy.tensor, g16.tensor, g_res.tensor);
  EXPECT_EQ(mismatches(mixed, to_host(g_res.tensor)), 0u);
}

// Paged attention over a batch: every run of queries of one sequence takes the
// tensor-core kernel (runs of 20 and 33 queries, odd counts), so together they write the
// whole output's operand, each run at its own rows; with a decode row in the batch (an
// fp32 kernel's run) none is written. Head sizes 64 and 128.
TEST(CudaFusedOperand, PagedPromptRunsWriteTheOperandAtTheirRows) {
  SKIP_WITHOUT_GPU();
  NumericsScope scope(ops::QuantizedMatmul::Fast);
  if (env_flag("CORVID_NO_FUSED_OPERAND")) GTEST_SKIP() << "CORVID_NO_FUSED_OPERAND is set";
  const int64_t heads = 8, kv_heads = 2, block = 16, pool_rows = 16 * block, m = 136;
  const std::vector<int32_t> tables = {3, 7, 0, 1, 5, 9, 12, 0, 0};  // 3 sequences x 3 blocks
  OwnedTensor spare = f32_tensor({64}, random_floats(64, 620));
  DeviceTensor g_spare_a = to_gpu(spare.tensor), g_spare_b = to_gpu(spare.tensor);
  for (int64_t head_dim : {64, 128}) {
    const int64_t k = heads * head_dim;
    const size_t pool_values = static_cast<size_t>(pool_rows * kv_heads * head_dim);
    DeviceTensor g_k = to_gpu(f32_tensor({pool_rows, kv_heads, head_dim}, random_floats(pool_values, 621)).tensor);
    DeviceTensor g_v = to_gpu(f32_tensor({pool_rows, kv_heads, head_dim}, random_floats(pool_values, 622)).tensor);
    DeviceTensor gw = gpu_weight(DType::BF16, m, k, 623);
    for (bool with_decode_row : {false, true}) {
      std::vector<int32_t> positions, query_seq;
      for (int32_t p = 0; p < 20; ++p) positions.push_back(p), query_seq.push_back(0);
      for (int32_t p = 10; p < 43; ++p) positions.push_back(p), query_seq.push_back(1);
      if (with_decode_row) positions.push_back(30), query_seq.push_back(2);
      const int64_t n = static_cast<int64_t>(positions.size());
      ops::PagedKV paged;
      paged.block_size = block;
      paged.block_tables = tables;
      paged.max_blocks = 3;
      paged.query_seq = query_seq;
      DeviceTensor gq = to_gpu(f32_tensor({n, heads, head_dim}, random_floats(static_cast<size_t>(n * k), 624)).tensor);
      DeviceTensor g_out(Device::CUDA, DType::F32, {n, heads, head_dim}), g_res(Device::CUDA, DType::F32, {n, m});
      std::vector<float> results[2];
      for (int unfused = 0; unfused < 2; ++unfused) {
        ops::matmul(gq.tensor.reshaped({n, k}), gw.tensor, g_res.tensor);  // producers now write bf16
        ops::paged_attention(gq.tensor, g_k.tensor, g_v.tensor, paged, positions, 0.1f, 0, g_out.tensor);
        if (unfused) ops::add(g_spare_a.tensor, g_spare_b.tensor);
        const uint64_t before = ops::cuda::gemm_operand_reuses();
        ops::matmul(g_out.tensor.reshaped({n, k}), gw.tensor, g_res.tensor);
        EXPECT_EQ(ops::cuda::gemm_operand_reuses() - before, unfused || with_decode_row ? 0u : 1u)
            << "head_dim " << head_dim << (with_decode_row ? " with a decode row" : "");
        results[unfused] = to_host(g_res.tensor);
      }
      EXPECT_EQ(mismatches(results[0], results[1]), 0u)
          << "head_dim " << head_dim << (with_decode_row ? " with a decode row" : "");
    }
  }
}

}  // namespace
}  // namespace corvid
