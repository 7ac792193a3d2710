// The prompt GEMM that reads the block formats itself (gemm_wgmma.cu, Hopper only).
// Runs only in builds with -DCORVID_CUDA=ON and skips without a compute-capability-9.0
// GPU.
//
// Tolerance: the kernel decodes each weight to f16 exactly as the weight tile of the
// cuBLAS path does, so the result must equal a float64 product of x rounded to f16 and
// those weights (cuda_test_util.h prompt_gemm_weights_f16) within 1e-5 x sum|x_i w_i|
// (fp32 accumulation order) — a wrong fragment, swizzle, scale or token row moves an
// output by its own magnitude — and agree with the cuBLAS path to the same tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/half.h"
#include "corvid/ops/cuda/gemm_wgmma.cuh"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using ops::cuda::FusedGemm;
using testing::f32_tensor;
using testing::make_weight;
using testing::NumericsScope;
using testing::random_floats;
using testing::to_gpu;
using testing::to_host;

// Sets the fused GEMM's mode for one scope (restored even when a check throws).
struct FusedGemmScope {
  explicit FusedGemmScope(FusedGemm mode, int tokens = 0)
      : before(ops::cuda::fused_gemm()), tokens_before(ops::cuda::fused_gemm_tokens()) {
    ops::cuda::set_fused_gemm(mode);
    ops::cuda::set_fused_gemm_tokens(tokens);
  }
  ~FusedGemmScope() {
    ops::cuda::set_fused_gemm(before);
    ops::cuda::set_fused_gemm_tokens(tokens_before);
  }
  FusedGemmScope(const FusedGemmScope&) = delete;
  FusedGemmScope& operator=(const FusedGemmScope&) = delete;
  FusedGemm before;
  int tokens_before;
};

float round_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

struct GemmCase {
  DType t;
  int64_t n, m, k;
};

TEST(CudaWgmmaGemm, EqualsProductOfRoundedOperandsAndTheCublasPath) {
  SKIP_WITHOUT_GPU();
  if (!ops::cuda::gemm_quantized_wgmma_runs_here()) GTEST_SKIP() << "not a compute-capability-9.0 GPU";
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  // Token counts inside one tile, across tiles and ragged; k from the 4 stages of the
  // buffer ring to 64 of them (the ring wraps many times); m of one and of several row
  // blocks; each case with 128 and with 256 tokens a block.
  const std::vector<GemmCase> cases = {
      {DType::Q4_0R, 67, 256, 512},   {DType::Q4_0R, 300, 128, 4096}, {DType::Q4_0R, 128, 384, 256},
      {DType::Q4_1R, 130, 256, 768},  {DType::Q4_1R, 9, 128, 256},    {DType::Q8_0R, 67, 256, 512},
      {DType::Q8_0R, 257, 128, 1280}, {DType::Q8_0R, 520, 128, 512},  {DType::Q4_KR, 67, 256, 512},
      {DType::Q4_KR, 300, 128, 2048},
  };
  for (int tokens : {128, 256})
  for (const GemmCase& tc : cases) {
    const int64_t n = tc.n, m = tc.m, k = tc.k;
    const DType stored = ops::stored_weight_dtype(tc.t);
    ASSERT_NE(stored, tc.t) << "a GPU row layout is made from a GGUF type";
    OwnedTensor w = make_weight(stored, m, k, random_floats(static_cast<size_t>(m * k), 31));
    const auto xv = random_floats(static_cast<size_t>(n * k), 32);
    OwnedTensor x = f32_tensor({n, k}, xv);
    DeviceTensor gw = testing::weight_to_gpu(w.tensor, tc.t), gx = to_gpu(x.tensor);

    DeviceTensor fused_out(Device::CUDA, DType::F32, {n, m}), cublas_out(Device::CUDA, DType::F32, {n, m});
    const uint64_t calls = ops::cuda::gemm_quantized_wgmma_calls();
    {
      FusedGemmScope always(FusedGemm::Always, tokens);
      ops::matmul(gx.tensor, gw.tensor, fused_out.tensor);
    }
    ASSERT_EQ(ops::cuda::gemm_quantized_wgmma_calls(), calls + 1) << dtype_name(tc.t) << ": the fused GEMM did not run";
    {
      FusedGemmScope never(FusedGemm::Never);
      ops::matmul(gx.tensor, gw.tensor, cublas_out.tensor);
    }
    ASSERT_EQ(ops::cuda::gemm_quantized_wgmma_calls(), calls + 1);
    const auto got = to_host(fused_out.tensor), ref = to_host(cublas_out.tensor);
    const auto wv = testing::prompt_gemm_weights_f16(w.tensor);  // as the GEMM rounds them
    double worst = 0, worst_vs_cublas = 0;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        double sum = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double p = static_cast<double>(round_f16(xv[static_cast<size_t>(r * k + i)])) *
                           wv[static_cast<size_t>(c * k + i)];
          sum += p;
          mag += std::abs(p);
        }
        const size_t at = static_cast<size_t>(r * m + c);
        const double err = std::abs(got[at] - sum) / (mag + 1e-30);
        const double err_cublas = std::abs(got[at] - ref[at]) / (mag + 1e-30);
        worst = std::max(worst, err);
        worst_vs_cublas = std::max(worst_vs_cublas, err_cublas);
        ASSERT_LE(err, 1e-5) << dtype_name(tc.t) << " tokens " << tokens << " n=" << n << " m=" << m << " k=" << k
                             << " token " << r << " row " << c << ": got " << got[at] << ", want " << sum;
        ASSERT_LE(err_cublas, 1e-5) << dtype_name(tc.t) << " token " << r << " row " << c;
      }
    std::printf("wgmma gemm %-5s %d tokens a block, n=%-4lld m=%-4lld k=%-5lld max err / sum|x w| = %.3g "
                "(vs cuBLAS path %.3g)\n",
                std::string(dtype_name(tc.t)).c_str(), tokens, static_cast<long long>(n), static_cast<long long>(m),
                static_cast<long long>(k), worst, worst_vs_cublas);
  }
}

// Shapes it does not take run the cuBLAS path: rows not a multiple of 128 and other
// formats, even with the fused GEMM forced. (k is a multiple of 256 wherever a GPU row
// layout exists: its rows are 16-byte aligned.)
TEST(CudaWgmmaGemm, OtherShapesAndFormatsTakeTheCublasPath) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  FusedGemmScope always(FusedGemm::Always);
  struct Case {
    DType t;
    int64_t m, k;
  };
  for (const Case& tc : {Case{DType::Q4_0R, 200, 512}, Case{DType::Q8_0R, 64, 512}, Case{DType::Q6_K, 128, 512},
                         Case{DType::BF16, 128, 512}}) {
    const int64_t n = 40;
    const DType stored = ops::stored_weight_dtype(tc.t);
    OwnedTensor w = make_weight(stored, tc.m, tc.k, random_floats(static_cast<size_t>(tc.m * tc.k), 41));
    OwnedTensor x = f32_tensor({n, tc.k}, random_floats(static_cast<size_t>(n * tc.k), 42));
    DeviceTensor gw = testing::weight_to_gpu(w.tensor, tc.t), gx = to_gpu(x.tensor);
    DeviceTensor out(Device::CUDA, DType::F32, {n, tc.m});
    const uint64_t calls = ops::cuda::gemm_quantized_wgmma_calls();
    ops::matmul(gx.tensor, gw.tensor, out.tensor);
    EXPECT_EQ(ops::cuda::gemm_quantized_wgmma_calls(), calls) << dtype_name(tc.t) << " m=" << tc.m << " k=" << tc.k;
  }
}

}  // namespace
}  // namespace corvid
