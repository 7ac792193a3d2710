// ops::matmul_glu on the GPU: for one token over a direct-load int8 format (Q4_0R,
// Q4_1R, Q8_0R, Q4_KR: gemv_direct.cu), one GEMV whose blocks take matching gate and up
// rows and store act(gate) * up, act silu (SwiGLU) or gelu_tanh (GeGLU). Runs only in
// builds with -DCORVID_CUDA=ON and skips without a GPU.
//
// Tolerance: none. Each row's sum is computed as the plain GEMV computes it, x is
// quantized by the same code, and each activation is one shared function (glu.cuh), so
// out must equal matmul then silu_mul / gelu_tanh_mul bit for bit. The fused path must also have run: it leaves
// the gate_up scratch untouched (filled with NaN here), while the two-op path (BF16
// weights, or CORVID_NO_FUSED_SILU=1) writes the products there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/env.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::make_weight;
using testing::mismatches;
using testing::NumericsScope;
using testing::random_floats;
using testing::to_gpu;
using testing::to_host;

TEST(CudaGluGemv, OneKernelEqualsMatmulThenTheActivation) {
  SKIP_WITHOUT_GPU();
  NumericsScope scope(ops::QuantizedMatmul::Fast);
  const bool fusion_off = env_flag("CORVID_NO_FUSED_SILU") || env_flag("CORVID_NO_DP4A");
  const int64_t k = 1024;
  for (ops::GatedActivation act : {ops::GatedActivation::Silu, ops::GatedActivation::GeluTanh}) {
    const char* act_name = act == ops::GatedActivation::Silu ? "silu" : "gelu_tanh";
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::BF16}) {
      // 1003: the last block has fewer pairs than the others (1003 = 4 * 250 + 3 = 2 * 501 + 1).
      for (int64_t half : {int64_t{1003}, int64_t{2048}}) {
        OwnedTensor w = make_weight(t, 2 * half, k, random_floats(static_cast<size_t>(2 * half * k), 601));
        DeviceTensor raw = to_gpu(w.tensor);
        const DType device_t = ops::device_weight_dtype(w.tensor, Device::CUDA);
        DeviceTensor gw(Device::CUDA, device_t, {2 * half, k});
        if (device_t == t) {
          gw = to_gpu(w.tensor);
        } else {
          ops::rearrange_weight(raw.tensor, gw.tensor);
        }
        const bool fused = !fusion_off && t != DType::BF16;
        DeviceTensor gx = to_gpu(f32_tensor({1, k}, random_floats(static_cast<size_t>(k), 602)).tensor);
        const std::vector<float> nans(static_cast<size_t>(2 * half), std::numeric_limits<float>::quiet_NaN());
        DeviceTensor g_gate_up = to_gpu(f32_tensor({1, 2 * half}, nans).tensor);
        DeviceTensor g_out(Device::CUDA, DType::F32, {1, half});
        ops::matmul_glu(gx.tensor, gw.tensor, g_gate_up.tensor, g_out.tensor, act);
        const auto got = to_host(g_out.tensor), scratch = to_host(g_gate_up.tensor);

        DeviceTensor g_products(Device::CUDA, DType::F32, {1, 2 * half}), g_ref(Device::CUDA, DType::F32, {1, half});
        ops::matmul(gx.tensor, gw.tensor, g_products.tensor);
        const Tensor gate(DType::F32, {1, half}, g_products.tensor.ptr<float>(), Device::CUDA);
        const Tensor up(DType::F32, {1, half}, g_products.tensor.ptr<float>() + half, Device::CUDA);
        if (act == ops::GatedActivation::Silu) {
          ops::silu_mul(gate, up, g_ref.tensor);
        } else {
          ops::gelu_tanh_mul(gate, up, g_ref.tensor);
        }
        EXPECT_EQ(mismatches(got, to_host(g_ref.tensor)), 0u) << act_name << " " << dtype_name(device_t) << " half=" << half;

        size_t nan_left = 0;
        for (float v : scratch) nan_left += std::isnan(v);
        if (fused) {
          EXPECT_EQ(nan_left, scratch.size()) << dtype_name(device_t) << ": the fused GEMV did not run";
        } else {
          EXPECT_EQ(mismatches(scratch, to_host(g_products.tensor)), 0u) << dtype_name(device_t) << " half=" << half;
        }
      }
    }
  }
}

}  // namespace
}  // namespace corvid
