// ops::matmul for every weight dtype: against a double-precision reference on the
// values the kernels see, batch invariance, thread-count determinism, bias,
// SIMD vs scalar, argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/ops.h"
#include "ops_test_util.h"

namespace corvid::ops {
namespace {

using namespace corvid::testing;

const DType kAllWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                 DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

int64_t k_for(DType t) { return dtype_info(t).block_elems == 256 ? 512 : 96; }

// The activation values the kernel multiplies with: x itself for float weights, else
// x quantized to the activation format and back.
std::vector<float> activation_values(DType w, const std::vector<float>& x, int64_t k) {
  if (!is_quantized(w)) return x;
  const cpu::QuantKernels& qa = cpu::quant_kernels(cpu::quant_kernels(w).act);
  std::vector<float> out(x.size());
  std::vector<uint8_t> buf(bytes_for(cpu::quant_kernels(w).act, k));
  for (size_t r = 0; r < x.size() / static_cast<size_t>(k); ++r) {
    qa.quantize(x.data() + r * k, buf.data(), k);
    qa.dequantize(buf.data(), out.data() + r * k, k);
  }
  return out;
}

TEST(Matmul, MatchesReferenceAllDtypes) {
  for (DType t : kAllWeightTypes) {
    const int64_t k = k_for(t);
    for (int64_t m : {1, 37}) {
      for (int64_t n : {1, 3, 17}) {
        const std::vector<float> wsrc = random_floats(static_cast<size_t>(m * k), 11);
        const std::vector<float> xsrc = random_floats(static_cast<size_t>(n * k), 12);
        OwnedTensor w = make_weight(t, m, k, wsrc);
        OwnedTensor x = f32_tensor({n, k}, xsrc);
        OwnedTensor out(DType::F32, {n, m});
        matmul(x.tensor, w.tensor, out.tensor);
        const std::vector<float> wv = weight_values(w.tensor);
        const std::vector<float> xv = activation_values(t, xsrc, k);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < m; ++r) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < k; ++j) {
              ref += static_cast<double>(wv[r * k + j]) * xv[i * k + j];
              mag += std::fabs(static_cast<double>(wv[r * k + j]) * xv[i * k + j]);
            }
            // Float accumulation (and Q8_1's f16 block sums) only: 1e-3 of the magnitude.
            ASSERT_NEAR(out.ptr<float>()[i * m + r], ref, 1e-3 * mag + 1e-5)
                << dtype_name(t) << " m=" << m << " n=" << n << " i=" << i << " r=" << r;
          }
        }
      }
    }
  }
}

// Model-sized shapes: depths of many blocks (SmolLM2's 576 and 1536, 2048), panels of 16 rows
// with ragged ends, every token count a kernel specialises (1-3 fused, 4-8 groups, buffered
// panels for more), activations with outlier columns as real hidden states have. Each element
// is checked against a double-precision dot of the values the kernels see, so a kernel that
// agrees with its own one-row form but is wrong fails here.
TEST(Matmul, ModelShapesMatchReferenceEveryElement) {
  ThreadPool two(2);
  for (DType t : kAllWeightTypes) {
    const bool k_quant = dtype_info(t).block_elems == 256;
    for (int64_t k : k_quant ? std::vector<int64_t>{768, 2048} : std::vector<int64_t>{576, 1536, 2048}) {
      for (int64_t m : {16, 53}) {
        std::vector<float> wsrc = random_floats(static_cast<size_t>(m * k), static_cast<uint32_t>(k + m));
        for (int64_t r = 0; r < m; ++r) {  // rows of very different scales
          for (int64_t j = 0; j < k; ++j) wsrc[static_cast<size_t>(r * k + j)] *= 0.02f * static_cast<float>(1 + r % 7);
        }
        OwnedTensor w = make_weight(t, m, k, wsrc);
        const std::vector<float> wv = weight_values(w.tensor);
        for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 40, 67}) {
          std::vector<float> xsrc = random_floats(static_cast<size_t>(n * k), static_cast<uint32_t>(n * 31 + k));
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 5; j < k; j += 97) xsrc[static_cast<size_t>(i * k + j)] *= 40.0f;  // outliers
          }
          OwnedTensor x = f32_tensor({n, k}, xsrc);
          OwnedTensor out(DType::F32, {n, m});
          cpu::matmul(x.tensor, w.tensor, out.tensor, nullptr, two);
          const std::vector<float> xv = activation_values(t, xsrc, k);
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t r = 0; r < m; ++r) {
              double ref = 0, mag = 0, min_term = 0;
              for (int64_t b = 0; b < k; b += 32) {
                double wmax = 0, xsum = 0;
                for (int64_t j = b; j < b + 32; ++j) {
                  const double wj = wv[static_cast<size_t>(r * k + j)], xj = xv[static_cast<size_t>(i * k + j)];
                  ref += wj * xj;
                  mag += std::fabs(wj * xj);
                  wmax = std::max(wmax, std::fabs(wj));
                  xsum += xj;
                }
                min_term += wmax * std::fabs(xsum);
              }
              // Float accumulation (a few ulps of the magnitude at these depths), plus, for the
              // formats with a min (Q4_1, Q5_1), the f16 rounding of Q8_1's block sums s:
              // |m * s| * 2^-11 per block, with |m| at most the block's largest weight.
              const bool has_min = t == DType::Q4_1 || t == DType::Q5_1;
              ASSERT_NEAR(out.ptr<float>()[i * m + r], ref, 2e-5 * mag + (has_min ? min_term / 2048 : 0.0) + 1e-5)
                  << dtype_name(t) << " k=" << k << " m=" << m << " n=" << n << " i=" << i << " r=" << r;
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, BatchInvariantAndThreadCountIndependent) {
  ThreadPool one(1), three(3);
  for (DType t : kAllWeightTypes) {
    const int64_t k = k_for(t), m = 45, n = 13;
    OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 21));
    const std::vector<float> xsrc = random_floats(static_cast<size_t>(n * k), 22);
    OwnedTensor x = f32_tensor({n, k}, xsrc);
    OwnedTensor a(DType::F32, {n, m}), b(DType::F32, {n, m});
    cpu::matmul(x.tensor, w.tensor, a.tensor, nullptr, one);
    cpu::matmul(x.tensor, w.tensor, b.tensor, nullptr, three);
    EXPECT_TRUE(bitwise_equal(a.ptr<float>(), b.ptr<float>(), static_cast<size_t>(n * m))) << dtype_name(t);
    for (int64_t i = 0; i < n; ++i) {
      Tensor xi(DType::F32, {1, k}, x.ptr<float>() + i * k);
      OwnedTensor oi(DType::F32, {1, m});
      matmul(xi, w.tensor, oi.tensor);
      ASSERT_TRUE(bitwise_equal(oi.ptr<float>(), a.ptr<float>() + i * m, static_cast<size_t>(m)))
          << dtype_name(t) << " row " << i;
    }
  }
}

TEST(Matmul, ScalarPathAgreesWithSimd) {
  for (DType t : kAllWeightTypes) {
    const int64_t k = k_for(t) * 2, m = 19, n = 4;
    OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 31));
    OwnedTensor x = f32_tensor({n, k}, random_floats(static_cast<size_t>(n * k), 32));
    OwnedTensor a(DType::F32, {n, m}), b(DType::F32, {n, m});
    matmul(x.tensor, w.tensor, a.tensor);
    cpu::set_force_scalar(true);
    matmul(x.tensor, w.tensor, b.tensor);
    cpu::set_force_scalar(false);
    for (int64_t i = 0; i < n * m; ++i) {
      EXPECT_NEAR(a.ptr<float>()[i], b.ptr<float>()[i], 1e-4 * (1 + std::fabs(b.ptr<float>()[i])))
          << dtype_name(t) << " i=" << i;
    }
  }
}

TEST(Matmul, Bias) {
  const int64_t m = 5, k = 64, n = 2;
  OwnedTensor w = make_weight(DType::F32, m, k, random_floats(m * k, 41));
  OwnedTensor x = f32_tensor({n, k}, random_floats(n * k, 42));
  OwnedTensor bias = f32_tensor({m}, {1, 2, 3, 4, 5});
  OwnedTensor a(DType::F32, {n, m}), b(DType::F32, {n, m});
  matmul(x.tensor, w.tensor, a.tensor);
  matmul(x.tensor, w.tensor, b.tensor, &bias.tensor);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < m; ++r) EXPECT_FLOAT_EQ(b.ptr<float>()[i * m + r], a.ptr<float>()[i * m + r] + (r + 1));
  }
}

TEST(Matmul, LargeOddShapesThreaded) {
  // Enough rows to split across threads, a row count that is not a multiple of the tile.
  const int64_t m = 1001, k = 256, n = 9;
  OwnedTensor w = make_weight(DType::Q4_1, m, k, random_floats(static_cast<size_t>(m * k), 51));
  OwnedTensor x = f32_tensor({n, k}, random_floats(static_cast<size_t>(n * k), 52));
  OwnedTensor a(DType::F32, {n, m});
  matmul(x.tensor, w.tensor, a.tensor);
  const std::vector<float> wv = weight_values(w.tensor);
  for (int64_t i = 0; i < n; ++i) {
    Tensor xi(DType::F32, {1, k}, x.ptr<float>() + i * k);
    OwnedTensor oi(DType::F32, {1, m});
    matmul(xi, w.tensor, oi.tensor);
    ASSERT_TRUE(bitwise_equal(oi.ptr<float>(), a.ptr<float>() + i * m, static_cast<size_t>(m)));
  }
}

TEST(Matmul, RejectsBadArguments) {
  OwnedTensor w(DType::F32, {4, 8});
  OwnedTensor x(DType::F32, {2, 8});
  OwnedTensor out(DType::F32, {2, 4});
  OwnedTensor bad_x(DType::F32, {2, 7});
  OwnedTensor bad_out(DType::F32, {2, 5});
  OwnedTensor q(DType::Q4_0, {4, 32});
  OwnedTensor xi(DType::I32, {2, 8});
  EXPECT_THROW(matmul(bad_x.tensor, w.tensor, out.tensor), Error);
  EXPECT_THROW(matmul(x.tensor, w.tensor, bad_out.tensor), Error);
  EXPECT_THROW(matmul(xi.tensor, w.tensor, out.tensor), Error);
  EXPECT_THROW(matmul(x.tensor, q.tensor, out.tensor), Error);  // inner dims 8 vs 32
  EXPECT_THROW(matmul(x.tensor, w.tensor, x.tensor), Error);
  Tensor cuda = x.tensor;
  cuda.device = Device::CUDA;
  try {
    matmul(cuda, w.tensor, out.tensor);
    FAIL() << "expected an error";
  } catch (const Error& e) {
#ifdef CORVID_HAVE_CUDA
    EXPECT_NE(std::string(e.what()).find("different devices"), std::string::npos);  // x on CUDA, w on the CPU
#else
    EXPECT_NE(std::string(e.what()).find("not built with CUDA"), std::string::npos);
#endif
  }
}

// The GPU row layouts (core/dtype.h Q4_0R/Q4_1R/Q8_0R/Q4_KR) are chosen only for CUDA uploads of
// aligned block-format matrices, and the CPU backend refuses them.
TEST(OpsRowLayout, DeviceWeightDtypeOnlyRearrangesAlignedBlockFormatsOnCuda) {
  const auto dtype_of = [](DType t, int64_t k, Device d) {
    return ops::device_weight_dtype(Tensor(t, {4, k}, nullptr), d);
  };
  EXPECT_EQ(dtype_of(DType::Q4_0, 4096, Device::CUDA), DType::Q4_0R);
  EXPECT_EQ(dtype_of(DType::Q4_1, 4096, Device::CUDA), DType::Q4_1R);
  EXPECT_EQ(dtype_of(DType::Q8_0, 4096, Device::CUDA), DType::Q8_0R);
  EXPECT_EQ(dtype_of(DType::Q4_1, 576, Device::CUDA), DType::Q4_1);  // 360-byte rows: not 16-byte aligned
  EXPECT_EQ(dtype_of(DType::Q4_K, 4096, Device::CUDA), DType::Q4_KR);
  EXPECT_EQ(dtype_of(DType::Q6_K, 4096, Device::CUDA), DType::Q6_K);
  EXPECT_EQ(dtype_of(DType::F16, 4096, Device::CUDA), DType::F16);
  EXPECT_EQ(dtype_of(DType::Q4_0, 4096, Device::CPU), DType::Q4_0);
  EXPECT_EQ(ops::device_weight_dtype(Tensor(DType::Q4_0, {4096}, nullptr), Device::CUDA), DType::Q4_0);  // 1-D
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K})
    EXPECT_EQ(ops::stored_weight_dtype(dtype_of(t, 4096, Device::CUDA)), t);  // and back
  EXPECT_EQ(ops::stored_weight_dtype(DType::Q6_K), DType::Q6_K);
  // Exact numerics keep the GGUF layouts, which their F32 GEMVs read.
  set_quantized_matmul(QuantizedMatmul::Exact);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K}) EXPECT_EQ(dtype_of(t, 4096, Device::CUDA), t);
  set_quantized_matmul(QuantizedMatmul::Fast);
}

TEST(OpsRowLayout, CpuOpsRefuseTheGpuLayouts) {
  OwnedTensor w = make_weight(DType::Q4_0, 4, 64, random_floats(256, 5));
  Tensor as_layout = w.tensor;
  as_layout.dtype = DType::Q4_0R;
  OwnedTensor x = f32_tensor({1, 64}, random_floats(64, 6)), out = f32_tensor({1, 4}, std::vector<float>(4));
  EXPECT_THROW(ops::matmul(x.tensor, as_layout, out.tensor), Error);
}

}  // namespace
}  // namespace corvid::ops
