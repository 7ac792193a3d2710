// The CUDA decode GEMV (ops::matmul with n <= 8 activation rows) on every weight
// dtype and on awkward shapes, against a float64 reference of the dequantized weights
// with the unquantized activations (the GPU never quantizes activations).
//
// Shapes: m not a multiple of the 4 rows a tiled block handles; k of one partial
// 2048-value tile, of whole tiles, and of whole tiles plus a partial one; rows whose
// byte length is not a multiple of 16 (those take the general one-warp-per-row
// kernels: Q6_K at k = 256 or 2304, Q4_0/Q8_0 at k = 96) next to rows that take the
// tiled kernels; n = 1..8.
//
// Tolerance, per output: |gpu - ref| <= 8 * sqrt(k) * 2^-24 * sum_i |w_i x_i| (+ bias
// rounding). F32 accumulation in any order has a typical error of about
// sqrt(k) * 2^-24 * sum |w_i x_i|; a wrong decode of even one value per row is off by
// about |w_i x_i| ~ sum / k, far above this for the k used here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::to_gpu;
using testing::to_host;
using testing::make_weight;
using testing::random_floats;
using testing::weight_values;

struct Shape {
  int64_t m, k;
};

// Runs out = x @ w^T + bias on the GPU (output poisoned with NaN first) and checks
// every output against the float64 reference. Returns the largest error / bound.
double check_gemv(DType t, Shape s, int64_t n, uint32_t seed) {
  const int64_t m = s.m, k = s.k;
  OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), seed));
  const auto wv = weight_values(w.tensor);
  const auto xv = random_floats(static_cast<size_t>(n * k), seed + 1);
  const auto bv = random_floats(static_cast<size_t>(m), seed + 2);
  OwnedTensor x = f32_tensor({n, k}, xv), bias = f32_tensor({m}, bv);
  DeviceTensor gw = to_gpu(w.tensor), gx = to_gpu(x.tensor), gb = to_gpu(bias.tensor);
  OwnedTensor poison = f32_tensor({n, m}, std::vector<float>(static_cast<size_t>(n * m), std::nanf("")));
  DeviceTensor g_out = to_gpu(poison.tensor);
  ops::matmul(gx.tensor, gw.tensor, g_out.tensor, &gb.tensor);
  const auto got = to_host(g_out.tensor);

  double worst = 0;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < m; ++r) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double p = static_cast<double>(xv[static_cast<size_t>(c * k + i)]) * wv[static_cast<size_t>(r * k + i)];
        ref += p;
        mag += std::abs(p);
      }
      ref += bv[static_cast<size_t>(r)];
      const double bound = 8.0 * std::sqrt(static_cast<double>(k)) * std::ldexp(1.0, -24) * mag +
                           std::abs(ref) * std::ldexp(1.0, -23) + 1e-30;
      const float g = got[static_cast<size_t>(c * m + r)];
      if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();  // unwritten or NaN
      worst = std::max(worst, std::abs(g - ref) / bound);
    }
  return worst;
}

using ops::cuda::GemvKernels;

// Selects the GEMV kernels for one scope (the default again at its end).
struct KernelsScope {
  explicit KernelsScope(GemvKernels k) { ops::cuda::set_gemv_kernels(k); }
  ~KernelsScope() { ops::cuda::set_gemv_kernels(GemvKernels::Auto); }
};

const char* kernels_name(GemvKernels k) {
  switch (k) {
    case GemvKernels::Auto: return "auto";
    case GemvKernels::Persistent: return "persistent";
    case GemvKernels::Tiled: return "tiled";
    case GemvKernels::General: return "general";
  }
  return "?";
}

TEST(CudaGemv, EveryDtypeShapeAndWidth) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (GemvKernels kernels : {GemvKernels::Persistent, GemvKernels::Tiled, GemvKernels::General}) {
    KernelsScope scope(kernels);
    const DType dtypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                            DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
    // k: one partial tile; a whole tile plus a partial one; two whole tiles.
    const Shape shapes[] = {{1, 256}, {7, 2304}, {130, 4096}};
    uint32_t seed = 100;
    for (DType t : dtypes)
      for (Shape s : shapes)
        for (int64_t n : {1, 2, 5, 8}) {
          const double e = check_gemv(t, s, n, seed += 3);
          EXPECT_LE(e, 1.0) << dtype_name(t) << " m=" << s.m << " k=" << s.k << " n=" << n << " "
                            << kernels_name(kernels);
        }
  }
}

TEST(CudaGemv, TiledTailsAndOddRows) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (GemvKernels kernels : {GemvKernels::Persistent, GemvKernels::Tiled}) {
    KernelsScope scope(kernels);
    // Q4_0/Q4_1/Q8_0 at k = 4608: two whole tiles and a 512-value tail, all 16-byte rows.
    // k = 96: rows of 54/60/102 bytes, so the general kernels. m = 1027 = 4 * 256 + 3.
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::BF16, DType::F16})
      for (Shape s : {Shape{1027, 4608}, Shape{5, 96}})
        for (int64_t n : {1, 3}) {
          const double e = check_gemv(t, s, n, 7 + static_cast<uint32_t>(n));
          EXPECT_LE(e, 1.0) << dtype_name(t) << " m=" << s.m << " k=" << s.k << " n=" << n << " "
                            << kernels_name(kernels);
        }
    // K-quants over many row blocks and whole tiles (k = 2048 * 3).
    for (DType t : {DType::Q4_K, DType::Q6_K}) {
      const double e = check_gemv(t, {1027, 6144}, 1, 11);
      EXPECT_LE(e, 1.0) << dtype_name(t) << " " << kernels_name(kernels);
    }
  }
}

TEST(CudaGemv, PersistentBlocksTakeSeveralRowGroups) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  // 9001 rows are 2251 four-row groups: more than the blocks an H200 holds at once
  // (132 SMs x 6 single-token blocks), so persistent blocks stream several groups, the last short.
  KernelsScope scope(GemvKernels::Persistent);
  for (DType t : {DType::Q4_0, DType::BF16, DType::Q6_K})
    for (int64_t n : {1, 2}) {
      const double e = check_gemv(t, {9001, t == DType::Q6_K ? 2048 : 2304}, n, 31);
      EXPECT_LE(e, 1.0) << dtype_name(t) << " n=" << n;
    }
}

TEST(CudaGemv, DetectsAWrongWeight) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  // The bound is tight enough that one changed quant in a row is caught: flip one
  // 4-bit value of a Q4_0 weight on the GPU only and expect a failure.
  const int64_t m = 8, k = 4096, n = 1;
  OwnedTensor w = make_weight(DType::Q4_0, m, k, random_floats(static_cast<size_t>(m * k), 21));
  const auto wv = weight_values(w.tensor);
  auto xv = random_floats(static_cast<size_t>(k), 22);
  xv[40 * 32 + 5] = 1.0f;  // the changed value's activation: not accidentally near zero
  OwnedTensor x = f32_tensor({n, k}, xv);
  OwnedTensor changed = make_weight(DType::Q4_0, m, k, random_floats(static_cast<size_t>(m * k), 21));
  static_cast<uint8_t*>(changed.tensor.row(3))[18 * 40 + 2 + 5] ^= 0x08;  // block 40, value 5: q +- 8
  DeviceTensor gw = to_gpu(changed.tensor), gx = to_gpu(x.tensor), g_out(Device::CUDA, DType::F32, {n, m});
  ops::matmul(gx.tensor, gw.tensor, g_out.tensor);
  const auto got = to_host(g_out.tensor);
  double ref = 0, mag = 0;
  for (int64_t i = 0; i < k; ++i) {
    ref += static_cast<double>(xv[static_cast<size_t>(i)]) * wv[static_cast<size_t>(3 * k + i)];
    mag += std::abs(static_cast<double>(xv[static_cast<size_t>(i)]) * wv[static_cast<size_t>(3 * k + i)]);
  }
  const double bound = 8.0 * std::sqrt(static_cast<double>(k)) * std::ldexp(1.0, -24) * mag;
  EXPECT_GT(std::abs(got[3] - ref), bound);
}

}  // namespace
}  // namespace corvid
