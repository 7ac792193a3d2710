// The ops that produce a decode GEMV's input on the GPU — RMSNorm of decode rows (with
// or without the residual add), silu_mul, decode attention's split combine — also write
// it as int8 activations (ops/cuda/context.h Int8Rows), and a GEMV that runs as the very
// next op takes them instead of launching its quantizer. The producers run the
// quantizer's F32 operations on the values they store, so the GEMV's result must be
// bit-identical to the unfused path, forced here by an unrelated op between producer
// and GEMV (after which the GEMV must quantize x itself: taking stale int8 would be wrong).
// Producers write int8 only while the decode GEMVs take it: a 16-bit GEMV in between
// turns it off (checked last).
#include <gtest/gtest.h>

#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv.h"
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

bool fused_quant_off() {
  return env_flag("CORVID_NO_FUSED_QUANT") || env_flag("CORVID_NO_DP4A");
}

// A decode GEMV on quantized weights, so that producers write int8 (Context::int8_wanted).
void run_a_quantized_gemv() {
  OwnedTensor w = make_weight(DType::Q4_0, 16, 256, random_floats(16 * 256, 511));
  DeviceTensor gw = to_gpu(w.tensor), gx(Device::CUDA, DType::F32, {1, 256}), g_res(Device::CUDA, DType::F32, {1, 16});
  ops::matmul(gx.tensor, gw.tensor, g_res.tensor);
}

TEST(CudaFusedQuant, ProducerInt8EqualsTheGemvQuantizer) {
  SKIP_WITHOUT_GPU();
  NumericsScope scope(ops::QuantizedMatmul::Fast);
  if (fused_quant_off()) GTEST_SKIP() << "CORVID_NO_FUSED_QUANT or CORVID_NO_DP4A is set";
  // Attention: 32 heads of 128 over 8 kv heads, a 512-row cache (so decode splits it).
  const int64_t heads = 32, kv_heads = 8, head_dim = 128, cache_rows = 512;
  const int64_t m = 1000, k = heads * head_dim;
  OwnedTensor norm_w = f32_tensor({k}, random_floats(static_cast<size_t>(k), 502));
  DeviceTensor g_norm_w = to_gpu(norm_w.tensor);
  OwnedTensor spare = f32_tensor({64}, random_floats(64, 503));
  DeviceTensor g_spare_a = to_gpu(spare.tensor), g_spare_b = to_gpu(spare.tensor);
  const size_t cache_values = static_cast<size_t>(cache_rows * kv_heads * head_dim);
  OwnedTensor keys = f32_tensor({cache_rows, kv_heads, head_dim}, random_floats(cache_values, 506));
  OwnedTensor values = f32_tensor({cache_rows, kv_heads, head_dim}, random_floats(cache_values, 507));
  DeviceTensor g_keys = to_gpu(keys.tensor), g_values = to_gpu(values.tensor);
  const int64_t short_rows = 200;
  const size_t short_values = static_cast<size_t>(short_rows * kv_heads * head_dim);
  DeviceTensor g_short_keys = to_gpu(f32_tensor({short_rows, kv_heads, head_dim}, random_floats(short_values, 515)).tensor);
  DeviceTensor g_short_values = to_gpu(f32_tensor({short_rows, kv_heads, head_dim}, random_floats(short_values, 516)).tensor);
  for (DType wt : {DType::Q4_0, DType::Q8_0, DType::Q4_K}) {
    OwnedTensor w = make_weight(wt, m, k, random_floats(static_cast<size_t>(m * k), 501));
    DeviceTensor raw = to_gpu(w.tensor);
    DeviceTensor gw(Device::CUDA, ops::device_weight_dtype(w.tensor, Device::CUDA), {m, k});
    ops::rearrange_weight(raw.tensor, gw.tensor);
    // Producers write int8 while decode GEMVs take it (Context::int8_wanted): one first.
    {
      DeviceTensor gx(Device::CUDA, DType::F32, {1, k}), g_res(Device::CUDA, DType::F32, {1, m});
      ops::matmul(gx.tensor, gw.tensor, g_res.tensor);
    }
    for (int n : {1, 3, 8}) {
      const auto xv = random_floats(static_cast<size_t>(n * k), 504), yv = random_floats(static_cast<size_t>(n * k), 505);
      OwnedTensor x = f32_tensor({n, k}, xv), y = f32_tensor({n, k}, yv);
      DeviceTensor gy = to_gpu(y.tensor);
      DeviceTensor g_out(Device::CUDA, DType::F32, {n, k}), g_res(Device::CUDA, DType::F32, {n, m});
      std::vector<int32_t> positions, short_positions;
      for (int t = 0; t < n; ++t) {
        positions.push_back(300 + 17 * t);
        short_positions.push_back(20 + 19 * t);  // some of the 7 splits have no keys
      }
      // Attention over a 512-row cache (16 splits) and over a 200-row one (7 splits, some
      // of them without keys for the earlier queries).
      for (Producer p : {Producer::RmsNorm, Producer::AddRmsNorm, Producer::SiluMul, Producer::Attention,
                         Producer::AttentionShortCache}) {
        std::vector<float> results[2];
        for (int unfused = 0; unfused < 2; ++unfused) {
          DeviceTensor gx = to_gpu(x.tensor);  // add_rms_norm adds into x: start from the same values
          if (p == Producer::RmsNorm) ops::rms_norm(gx.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
          if (p == Producer::AddRmsNorm) ops::add_rms_norm(gx.tensor, gy.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
          if (p == Producer::SiluMul) ops::silu_mul(gx.tensor, gy.tensor, g_out.tensor);
          if (p == Producer::Attention) {
            ops::attention(gx.tensor.reshaped({n, heads, head_dim}), g_keys.tensor, g_values.tensor, positions,
                           0.088f, 0, g_out.tensor.reshaped({n, heads, head_dim}));
          }
          if (p == Producer::AttentionShortCache) {
            ops::attention(gx.tensor.reshaped({n, heads, head_dim}), g_short_keys.tensor, g_short_values.tensor,
                           short_positions, 0.088f, 0, g_out.tensor.reshaped({n, heads, head_dim}));
          }
          if (unfused) ops::add(g_spare_a.tensor, g_spare_b.tensor);
          const uint64_t before = ops::cuda::gemv_int8_reuses();
          ops::matmul(g_out.tensor, gw.tensor, g_res.tensor);
          EXPECT_EQ(ops::cuda::gemv_int8_reuses() - before, unfused ? 0u : 1u)
              << producer_name(p) << " " << dtype_name(wt) << " n=" << n;
          results[unfused] = to_host(g_res.tensor);
        }
        EXPECT_EQ(mismatches(results[0], results[1]), 0u) << producer_name(p) << " " << dtype_name(wt) << " n=" << n;
      }
      // The producer's output overwritten by a copy before the GEMV: its int8 are stale now,
      // and the GEMV must quantize the new values (as it does for y uploaded afresh).
      ops::silu_mul(to_gpu(x.tensor).tensor, gy.tensor, g_out.tensor);
      copy_tensor(g_out.tensor, y.tensor);
      ops::matmul(g_out.tensor, gw.tensor, g_res.tensor);
      const auto after_copy = to_host(g_res.tensor);
      ops::matmul(gy.tensor, gw.tensor, g_res.tensor);
      const auto fresh = to_host(g_res.tensor);
      EXPECT_EQ(mismatches(after_copy, fresh), 0u) << "output overwritten after silu_mul, " << dtype_name(wt) << " n=" << n;
    }
  }
  // After a BF16 GEMV the producers stop writing int8: the next quantized GEMV quantizes x itself.
  OwnedTensor w16 = make_weight(DType::BF16, 16, k, random_floats(static_cast<size_t>(16 * k), 508));
  DeviceTensor gw16 = to_gpu(w16.tensor), gx = to_gpu(f32_tensor({1, k}, random_floats(static_cast<size_t>(k), 509)).tensor);
  DeviceTensor g_out(Device::CUDA, DType::F32, {1, k}), g_res16(Device::CUDA, DType::F32, {1, 16});
  ops::matmul(gx.tensor, gw16.tensor, g_res16.tensor);
  EXPECT_FALSE(ops::cuda::gemv_int8_inputs());
  ops::rms_norm(gx.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
  OwnedTensor w8 = make_weight(DType::Q8_0, m, k, random_floats(static_cast<size_t>(m * k), 510));
  DeviceTensor gw8 = to_gpu(w8.tensor), g_res(Device::CUDA, DType::F32, {1, m});
  const uint64_t before = ops::cuda::gemv_int8_reuses();
  ops::matmul(g_out.tensor, gw8.tensor, g_res.tensor);
  EXPECT_EQ(ops::cuda::gemv_int8_reuses(), before);
  EXPECT_TRUE(ops::cuda::gemv_int8_inputs());
}

// Rows that end inside a warp (widths 800 and 4128: not multiples of 128), which the
// GEMV tests above cannot reach (quantized rows of those widths are not 16-byte
// aligned): the int8 a producer writes equal, byte for byte, what the GEMV's quantizer
// makes of the producer's F32 output.
TEST(CudaFusedQuant, ProducerInt8EqualsTheQuantizerOnRowsEndingInsideAWarp) {
  SKIP_WITHOUT_GPU();
  NumericsScope scope(ops::QuantizedMatmul::Fast);
  if (fused_quant_off()) GTEST_SKIP() << "CORVID_NO_FUSED_QUANT or CORVID_NO_DP4A is set";
  ops::cuda::Context& ctx = ops::cuda::context();
  for (int64_t cols : {800, 4128}) {
    OwnedTensor norm_w = f32_tensor({cols}, random_floats(static_cast<size_t>(cols), 512));
    DeviceTensor g_norm_w = to_gpu(norm_w.tensor);
    for (int64_t n : {1, 3}) {
      const size_t count = static_cast<size_t>(n * cols);
      OwnedTensor x = f32_tensor({n, cols}, random_floats(count, 513)), y = f32_tensor({n, cols}, random_floats(count, 514));
      DeviceTensor gy = to_gpu(y.tensor), g_out(Device::CUDA, DType::F32, {n, cols});
      for (Producer p : {Producer::RmsNorm, Producer::AddRmsNorm, Producer::SiluMul}) {
        DeviceTensor gx = to_gpu(x.tensor);
        run_a_quantized_gemv();
        if (p == Producer::RmsNorm) ops::rms_norm(gx.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
        if (p == Producer::AddRmsNorm) ops::add_rms_norm(gx.tensor, gy.tensor, g_norm_w.tensor, 1e-5f, g_out.tensor);
        if (p == Producer::SiluMul) ops::silu_mul(gx.tensor, gy.tensor, g_out.tensor);
        const ops::cuda::Context::Int8Rows made = ctx.int8_rows;
        ASSERT_EQ(made.x, g_out.tensor.data) << producer_name(p) << " wrote no int8, cols=" << cols << " n=" << n;
        ASSERT_TRUE(made.q != nullptr && made.rows == n && made.cols == cols);
        std::vector<int8_t> q(count), q_ref(count);
        std::vector<float> d(count / 32), d_ref(count / 32);
        copy_bytes(q.data(), Device::CPU, made.q, Device::CUDA, q.size());
        copy_bytes(d.data(), Device::CPU, made.d, Device::CUDA, d.size() * sizeof(float));
        const ops::cuda::Int8Activations ref = ops::cuda::quantize_activations(g_out.tensor.ptr<float>(), n, cols, ctx.stream);
        copy_bytes(q_ref.data(), Device::CPU, ref.q, Device::CUDA, q_ref.size());
        copy_bytes(d_ref.data(), Device::CPU, ref.d, Device::CUDA, d_ref.size() * sizeof(float));
        EXPECT_EQ(q, q_ref) << producer_name(p) << " cols=" << cols << " n=" << n;
        EXPECT_EQ(d, d_ref) << producer_name(p) << " cols=" << cols << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace corvid
