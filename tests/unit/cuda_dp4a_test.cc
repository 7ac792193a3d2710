// The int8-activation (dp4a) decode GEMV of QuantizedMatmul::Fast (ops/cuda/gemv_dp4a.cu)
// for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K weights, n = 1..8 activation rows, on the 8B
// model's shapes, a partial 2048-value tile (k = 2304) and row counts that are not a
// multiple of the kernel's 4-row groups.
//
// Checks and their tolerances (errors as rel_err: max |diff| / max |reference|):
// (a) against a float64 reference that quantizes x exactly as the kernel does (int8
//     per 32 values, d = max|x| / 127 in F32, q = nearest-even(x * (1 / d))) and dots
//     the CPU backend's dequantized weights with d * q: <= 1e-5. It is the same
//     arithmetic up to F32 accumulation order, so a wrong decode, scale or offset of a
//     single group is far outside it.
// (b) against the GPU's Exact (F32 activation) kernels: <= 2e-2. The int8 rounding
//     error of a value is at most d / 2 (uniform, std ~ max|x_block| / 440), which moves
//     an output by ~0.5% of its typical size; with the outliers in x used here the
//     worst output of a 1024 x 4096 x 8 product is off by ~8.5e-3 of the max output
//     (CudaDp4aReference.ToleranceBudget measures it on the CPU).
// (c) against the CPU backend's Fast matmul: Q8_0/Q4_0/Q4_1 quantize x the same way
//     (Q8_0/Q8_1 blocks of 32) but store d as F16: <= 2e-3 (measured 2e-4..5e-4); the
//     K-quants' CPU activations are Q8_K (one scale per 256 values, coarser), so the two
//     differ by both roundings: <= 5e-2 (measured 2.2e-2).
// With CORVID_NO_DP4A=1 the path is off and these tests skip.
//
// Q4_0R, Q4_1R, Q8_0R and Q4_KR are the GPU row layouts made at upload (ops::rearrange_weight);
// they run gemv_direct.cu's kernels (as Q4_K does unless CORVID_NO_DIRECT_GEMV=1) and
// are checked the same way from the same GGUF-format weights, plus: (d) the Exact GEMV
// (general kernels decoding the layout) and (e) the tensor-core prefill GEMM (n = 40,
// weights decoded to bf16) against the same weight uploaded in its GGUF format: Exact
// <= 1e-5 (summation order differs), prefill bit-identical (same decoded values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::make_weight;
using testing::NumericsScope;
using testing::random_floats;
using testing::rel_err;
using testing::to_gpu;
using testing::to_host;
using testing::weight_values;

constexpr int kMaxCols = 8;

// The host weight on the GPU in dtype t: copied as is, or rearranged into t's row layout.
DeviceTensor weight_on_gpu(const Tensor& host, DType t) {
  if (t == host.dtype) return to_gpu(host);
  DeviceTensor raw = to_gpu(host);
  DeviceTensor d(Device::CUDA, t, {host.dim(0), host.dim(1)});
  ops::rearrange_weight(raw.tensor, d.tensor);
  return d;
}

bool dp4a_off() {
  const char* v = std::getenv("CORVID_NO_DP4A");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// x [n, k] quantized as the GPU does: q [n, k] int8 values, d [n, k / 32].
void quantize_like_gpu(const std::vector<float>& x, std::vector<int>& q, std::vector<float>& d) {
  const size_t blocks = x.size() / 32;
  q.assign(x.size(), 0);
  d.assign(blocks, 0.0f);
  for (size_t b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    for (size_t j = 0; j < 32; ++j) q[32 * b + j] = static_cast<int>(std::nearbyint(x[32 * b + j] * id));
    d[b] = db;
  }
}

// ref[c, r] = sum_b d[c, b] * sum_j w[r, 32b + j] * q[c, 32b + j] + bias[r], float64.
std::vector<double> quantized_reference(const std::vector<float>& wv, const std::vector<float>& xv,
                                        const std::vector<float>& bias, int64_t m, int64_t k, int n) {
  std::vector<int> q;
  std::vector<float> d;
  quantize_like_gpu(xv, q, d);
  std::vector<double> ref(static_cast<size_t>(n * m));
  for (int c = 0; c < n; ++c)
    for (int64_t r = 0; r < m; ++r) {
      const float* w = wv.data() + r * k;
      const int* qc = q.data() + c * k;
      double s = 0;
      for (int64_t b = 0; b < k / 32; ++b) {
        double blk = 0;
        for (int64_t j = 32 * b; j < 32 * b + 32; ++j) blk += static_cast<double>(w[j]) * qc[j];
        s += blk * d[static_cast<size_t>(c * (k / 32) + b)];
      }
      ref[static_cast<size_t>(c * m + r)] = s + bias[static_cast<size_t>(r)];
    }
  return ref;
}

// First n rows of a [rows, cols] matrix, as floats.
template <class T>
std::vector<float> leading_rows(const std::vector<T>& v, int64_t cols, int n) {
  return std::vector<float>(v.begin(), v.begin() + n * cols);
}

// out = x[:n] @ w^T + bias on the GPU in the current numerics; output poisoned first.
std::vector<float> gpu_matmul(const DeviceTensor& gw, const std::vector<float>& xv, const DeviceTensor& gb,
                              int64_t m, int64_t k, int n) {
  OwnedTensor x = f32_tensor({n, k}, leading_rows(xv, k, n));
  OwnedTensor poison = f32_tensor({n, m}, std::vector<float>(static_cast<size_t>(n * m), std::nanf("")));
  DeviceTensor gx = to_gpu(x.tensor), g_out = to_gpu(poison.tensor);
  ops::matmul(gx.tensor, gw.tensor, g_out.tensor, &gb.tensor);
  return to_host(g_out.tensor);
}

struct Shape {
  int64_t m, k;
};

void check_format(DType t) {
  const Shape shapes[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}, {13, 4096}, {7, 2304}, {1, 2048}};
  uint32_t seed = 4000 + static_cast<uint32_t>(t) * 10;
  for (const Shape s : shapes) {
    const int64_t m = s.m, k = s.k;
    if (k % dtype_info(t).block_elems != 0) continue;
    const DType stored = ops::stored_weight_dtype(t);
    OwnedTensor w = make_weight(stored, m, k, random_floats(static_cast<size_t>(m * k), seed++));
    // The dp4a kernels need 16-byte rows (Q6_K's 210-byte blocks at k = 2304 are not):
    // other shapes stay on the F32 kernels, which the other CUDA tests cover.
    if (w.tensor.row_bytes() % 16 != 0) continue;
    const auto wv = weight_values(w.tensor);
    // Activations with a few outliers, as real hidden states have.
    auto xv = random_floats(static_cast<size_t>(kMaxCols * k), seed++);
    for (size_t i = 0; i < xv.size(); i += 97) xv[i] *= 8.0f;
    const auto bv = random_floats(static_cast<size_t>(m), seed++);
    OwnedTensor bias = f32_tensor({m}, bv);
    DeviceTensor gw = weight_on_gpu(w.tensor, t), gb = to_gpu(bias.tensor);
    ASSERT_EQ(gw.tensor.dtype, t);

    const auto ref = quantized_reference(wv, xv, bv, m, k, kMaxCols);
    std::vector<float> exact;
    {
      NumericsScope scope(ops::QuantizedMatmul::Exact);
      exact = gpu_matmul(gw, xv, gb, m, k, kMaxCols);
    }
    std::vector<float> cpu_fast(static_cast<size_t>(kMaxCols * m));
    {
      NumericsScope scope(ops::QuantizedMatmul::Fast);
      OwnedTensor x = f32_tensor({kMaxCols, k}, xv), out = f32_tensor({kMaxCols, m}, cpu_fast);
      ops::matmul(x.tensor, w.tensor, out.tensor, &bias.tensor);
      std::copy(out.ptr<float>(), out.ptr<float>() + cpu_fast.size(), cpu_fast.begin());
    }
    const bool k_quant = t == DType::Q4_K || t == DType::Q4_KR || t == DType::Q6_K;
    if (stored != t) {
      // (d) and (e): the layout against the same weight in its GGUF format on the GPU.
      DeviceTensor g_stored = to_gpu(w.tensor);
      NumericsScope exact_scope(ops::QuantizedMatmul::Exact);
      const auto exact_stored = gpu_matmul(g_stored, xv, gb, m, k, kMaxCols);
      EXPECT_LE(rel_err(exact, exact_stored.data(), exact.size()), 1e-5) << dtype_name(t) << " Exact, m=" << m;
      ops::set_quantized_matmul(ops::QuantizedMatmul::Fast);
      constexpr int kPrompt = 40;
      const auto prompt_x = random_floats(static_cast<size_t>(kPrompt * k), seed++);
      const auto pre = gpu_matmul(gw, prompt_x, gb, m, k, kPrompt);
      const auto pre_stored = gpu_matmul(g_stored, prompt_x, gb, m, k, kPrompt);
      EXPECT_EQ(testing::mismatches(pre, pre_stored), 0u) << dtype_name(t) << " prefill, m=" << m << " k=" << k;
    }
    for (int n = 1; n <= kMaxCols; ++n) {
      NumericsScope scope(ops::QuantizedMatmul::Fast);
      const auto got = gpu_matmul(gw, xv, gb, m, k, n);
      const size_t count = static_cast<size_t>(n * m);
      // (a): the double reference, compared in double so its rounding to F32 does not count.
      double diff = 0, mag = 1e-30;
      bool finite = true;
      for (size_t i = 0; i < count; ++i) {
        finite = finite && std::isfinite(got[i]);
        diff = std::max(diff, std::abs(got[i] - ref[i]));
        mag = std::max(mag, std::abs(ref[i]));
      }
      const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                                " n=" + std::to_string(n);
      EXPECT_TRUE(finite) << where;
      EXPECT_LE(diff / mag, 1e-5) << "vs quantized-x reference, " << where;
      // (b): the Exact kernels; and the difference must be there (the int8 path ran).
      const double vs_exact = rel_err(got, exact.data(), count);
      EXPECT_GT(vs_exact, 1e-6) << "Fast equals Exact: the dp4a path did not run, " << where;
      // (b) and (c) measure rounding noise relative to the largest output: with a handful of
      // outputs the largest can be small by chance (seen on the H200: m=1..13, n=1 gave
      // 0.02-0.23 while (a) held to 1e-5), so they are asserted on 64+ outputs only.
      if (count < 64) continue;
      EXPECT_LE(vs_exact, 2e-2) << "vs GPU Exact, " << where;
      // (c): the CPU's Fast matmul.
      EXPECT_LE(rel_err(got, cpu_fast.data(), count), k_quant ? 5e-2 : 2e-3) << "vs CPU Fast, " << where;
    }
  }
}

class CudaDp4a : public ::testing::TestWithParam<DType> {};

TEST_P(CudaDp4a, MatchesQuantizedReferenceExactAndCpuFast) {
  SKIP_WITHOUT_GPU();
  if (dp4a_off()) GTEST_SKIP() << "CORVID_NO_DP4A is set";
  check_format(GetParam());
}

std::string format_name(const ::testing::TestParamInfo<DType>& param_info) {
  return std::string(dtype_name(param_info.param));
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaDp4a,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K,
                                           DType::Q8_0R, DType::Q4_0R, DType::Q4_1R, DType::Q4_KR),
                         format_name);

// The tolerances of (b) and (c) hold for the quantized-x reference itself (no GPU
// needed): against the float64 product with unquantized x, and against the CPU's Fast
// matmul, on a 1024 x 4096 matrix and 8 activation rows.
TEST(CudaDp4aReference, ToleranceBudget) {
  const int64_t m = 1024, k = 4096;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
    OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 91));
    const auto wv = weight_values(w.tensor);
    auto xv = random_floats(static_cast<size_t>(kMaxCols * k), 92);
    for (size_t i = 0; i < xv.size(); i += 97) xv[i] *= 8.0f;
    const std::vector<float> bv(static_cast<size_t>(m), 0.0f);
    const auto ref = quantized_reference(wv, xv, bv, m, k, kMaxCols);
    const std::vector<float> ref_f(ref.begin(), ref.end());
    std::vector<float> exact(static_cast<size_t>(kMaxCols * m));
    for (int c = 0; c < kMaxCols; ++c)
      for (int64_t r = 0; r < m; ++r) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i) s += static_cast<double>(wv[r * k + i]) * xv[c * k + i];
        exact[static_cast<size_t>(c * m + r)] = static_cast<float>(s);
      }
    NumericsScope scope(ops::QuantizedMatmul::Fast);
    OwnedTensor x = f32_tensor({kMaxCols, k}, xv), out = f32_tensor({kMaxCols, m}, exact);
    ops::matmul(x.tensor, w.tensor, out.tensor);
    const std::vector<float> cpu_fast(out.ptr<float>(), out.ptr<float>() + exact.size());
    const bool k_quant = t == DType::Q4_K || t == DType::Q6_K;
    const double vs_exact = rel_err(ref_f, exact.data(), exact.size());
    const double vs_cpu = rel_err(ref_f, cpu_fast.data(), exact.size());
    EXPECT_LE(vs_exact, 2e-2) << dtype_name(t);
    EXPECT_GT(vs_exact, 1e-4) << dtype_name(t) << ": the reference does not quantize x";
    EXPECT_LE(vs_cpu, k_quant ? 5e-2 : 2e-3) << dtype_name(t);
    std::printf("%s: quantized-x reference vs exact %.2e, vs CPU Fast %.2e\n", std::string(dtype_name(t)).c_str(),
                vs_exact, vs_cpu);
  }
}

// Exact numerics never take the int8 path: decode matches the F32 reference tightly.
TEST(CudaDp4aExact, ExactModeKeepsF32Activations) {
  SKIP_WITHOUT_GPU();
  const int64_t m = 13, k = 4096;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 77));
    const auto wv = weight_values(w.tensor);
    const auto xv = random_floats(static_cast<size_t>(2 * k), 78);
    const std::vector<float> bv(static_cast<size_t>(m), 0.0f);
    OwnedTensor bias = f32_tensor({m}, bv);
    DeviceTensor gw = to_gpu(w.tensor), gb = to_gpu(bias.tensor);
    NumericsScope scope(ops::QuantizedMatmul::Exact);
    const auto got = gpu_matmul(gw, xv, gb, m, k, 2);
    std::vector<float> ref(static_cast<size_t>(2 * m));
    for (int c = 0; c < 2; ++c)
      for (int64_t r = 0; r < m; ++r) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i) s += static_cast<double>(wv[r * k + i]) * xv[c * k + i];
        ref[static_cast<size_t>(c * m + r)] = static_cast<float>(s);
      }
    EXPECT_LE(rel_err(got, ref.data(), ref.size()), 1e-5) << dtype_name(t);
  }
}

}  // namespace
}  // namespace corvid
