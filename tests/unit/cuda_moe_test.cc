// The MoE ops on the GPU (ops/cuda/moe.cu, moe_experts.cu) against the CPU's and a
// float64 sum. Runs only in -DCORVID_CUDA=ON builds; skips without a GPU.
//
// Tolerances:
// - routing: the same experts in the same order as the CPU (the logits are drawn far
//   from ties), weights within 1e-6 (expf against std::exp, a few ulps).
// - experts, the GEMVs (steps of up to 8 tokens, and Exact numerics): F32 activations
//   and sums over the decoded weights, within 1e-5 x sum |w_j * terms| of a float64 sum.
// - experts, the grouped GEMM (longer steps, Fast): x, act and the weights rounded to
//   the 16-bit operand (f16 for f16 and the block formats, bf16 otherwise), so within
//   2^-7 (bf16) or 2^-9 (f16) of the magnitude of the float64 sum of the terms: a wrong
//   tile, expert or row is off by the output's own size.
// - batch invariance: a token's output is the same bits whichever tokens share its step,
//   within each kind of step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/half.h"
#include "corvid/ops/moe.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::make_weight;
using testing::NumericsScope;
using testing::random_floats;
using testing::to_gpu;
using testing::to_host;
using testing::weight_values;

TEST(CudaMoeRoute, PicksTheCpusExpertsInItsOrder) {
  SKIP_WITHOUT_GPU();
  for (const auto& [E, k] : {std::pair<int64_t, int64_t>{128, 8}, {8, 2}, {60, 4}, {1024, 64}}) {
    for (bool norm : {false, true}) {
      const int64_t n = 37;
      // Well-separated logits: a permutation of 0..E-1 per row, scaled.
      std::vector<float> logits(static_cast<size_t>(n * E));
      std::mt19937 rng(static_cast<uint32_t>(E + k));
      for (int64_t t = 0; t < n; ++t) {
        std::vector<int> perm(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = static_cast<int>(e);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t e = 0; e < E; ++e)
          logits[static_cast<size_t>(t * E + e)] = 8.0f * static_cast<float>(perm[static_cast<size_t>(e)]) / E;
      }
      // Row 0: all equal (ties go to the lower index).
      std::fill(logits.begin(), logits.begin() + E, 0.5f);
      OwnedTensor cl = f32_tensor({n, E}, logits);
      std::vector<float> cw(static_cast<size_t>(n * k));
      std::vector<int32_t> cid(cw.size());
      ops::moe_route(cl.tensor, norm, Tensor(DType::F32, {n, k}, cw.data()), Tensor(DType::I32, {n, k}, cid.data()));
      DeviceTensor gl = to_gpu(cl.tensor), gw(Device::CUDA, DType::F32, {n, k}), gid(Device::CUDA, DType::I32, {n, k});
      ops::moe_route(gl.tensor, norm, gw.tensor, gid.tensor);
      const std::vector<float> w = to_host(gw.tensor);
      std::vector<int32_t> id(cid.size());
      copy_tensor(Tensor(DType::I32, {n, k}, id.data()), gid.tensor);
      EXPECT_EQ(id, cid) << "E " << E << " k " << k;
      for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(w[i], cw[i], 1e-6) << "E " << E << " k " << k << " at " << i;
      for (int64_t j = 0; j < k; ++j) EXPECT_EQ(id[static_cast<size_t>(j)], j);  // the tied row
    }
  }
}

// Expert weights of one layer stored as `stored` (gate/up fused as transformers 5 stores
// them, [E * 2I, H], so the stacks' offsets are exercised; down [E * H, I]) and uploaded in
// the layout a model's upload gives them now (ops::device_weight_dtype: the GPU row
// layouts in Fast numerics, the GGUF ones in Exact).
struct GpuExperts {
  int64_t E, H, I;
  OwnedTensor gate_up, down;  // host, stored dtype
  DType t;                    // on the GPU
  DeviceTensor g_gate_up, g_down;
  std::vector<float> gate_up_f, down_f;  // the stored values, as F32

  GpuExperts(int64_t e, int64_t h, int64_t i, DType stored, uint32_t seed)
      : E(e), H(h), I(i),
        gate_up(make_weight(stored, e * 2 * i, h, random_floats(static_cast<size_t>(e * 2 * i * h), seed, 0.3f))),
        down(make_weight(stored, e * h, i, random_floats(static_cast<size_t>(e * h * i), seed + 1, 0.3f))),
        t(ops::device_weight_dtype(gate_up.tensor, Device::CUDA)) {
    EXPECT_EQ(ops::device_weight_dtype(down.tensor, Device::CUDA), t) << "gate_up and down in one layout";
    g_gate_up = testing::weight_to_gpu(gate_up.tensor, t);
    g_down = testing::weight_to_gpu(down.tensor, t);
    gate_up_f = weight_values(gate_up.tensor);
    down_f = weight_values(down.tensor);
  }
  ops::Experts experts() const {
    ops::Experts x;
    x.count = E, x.ffn = I;
    x.gate.data = x.up.data = g_gate_up.tensor;
    x.gate.rows = x.up.rows = I;
    x.gate.stride = x.up.stride = 2 * I;
    x.up.offset = I;
    x.down.data = g_down.tensor;
    x.down.rows = x.down.stride = H;
    return x;
  }
};

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routing random_routing(int64_t n, int64_t k, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  Routing r;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) all[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::shuffle(all.begin(), all.end(), rng);
    for (int64_t j = 0; j < k; ++j) {
      r.ids.push_back(all[static_cast<size_t>(j)]);
      r.weights.push_back(std::uniform_real_distribution<float>(0.1f, 1.0f)(rng));
    }
  }
  return r;
}

// moe_experts on the GPU: out [n, H] (in_place: written over x).
std::vector<float> gpu_experts(const GpuExperts& g, const std::vector<float>& x, const Routing& r, int64_t k,
                               bool in_place = false) {
  const int64_t n = static_cast<int64_t>(x.size()) / g.H, pairs = n * k;
  DeviceTensor gx = to_gpu(f32_tensor({n, g.H}, x).tensor);
  DeviceTensor gid(Device::CUDA, DType::I32, {n, k}), gw = to_gpu(f32_tensor({n, k}, r.weights).tensor);
  std::vector<int32_t> ids = r.ids;
  copy_tensor(gid.tensor, Tensor(DType::I32, {n, k}, ids.data()));
  DeviceTensor act(Device::CUDA, DType::F32, {pairs, g.I}), y(Device::CUDA, DType::F32, {pairs, g.H});
  DeviceTensor plan(Device::CUDA, DType::I32, {ops::moe_plan_size(pairs, g.E)});
  DeviceTensor out(Device::CUDA, DType::F32, {n, g.H});
  const ops::MoeScratch s{Tensor(), act.tensor, Tensor(), y.tensor, plan.tensor};
  ops::moe_experts(gx.tensor, g.experts(), gid.tensor, gw.tensor, ops::GatedActivation::Silu, s,
                   in_place ? gx.tensor : out.tensor);
  return to_host(in_place ? gx.tensor : out.tensor);
}

float round16(float v, bool f16) { return f16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v)); }

// v rounded per 32 values to int8 as the GPU's int8 activations are (gemv.h
// quantize_activations: d = max|v| / 127, q = nearest-even(v * (1 / d)), F32), as values.
std::vector<double> int8_values(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t b = 0; b < v.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(static_cast<float>(v[j])));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t j = b; j < b + 32; ++j) out[j] = std::nearbyint(static_cast<float>(v[j]) * id) * static_cast<double>(d);
  }
  return out;
}

// How the reference rounds the operands: not at all, to the 16-bit operand of the
// grouped GEMM, or x and act to int8 blocks (the int8 decode GEMVs).
enum class Rounding { None, Half, Int8 };

// The float64 reference with the operands rounded as `round` says; returns the worst
// |got - want| / scale, scale = sum_j |w_j| * sum_c |down terms| of the row.
double worst_error(const GpuExperts& g, const std::vector<float>& x, const Routing& r, int64_t k,
                   const std::vector<float>& got, Rounding rounding, bool f16) {
  const int64_t n = static_cast<int64_t>(x.size()) / g.H, H = g.H, I = g.I;
  const bool rounded = rounding == Rounding::Half;
  auto rd = [&](float v) { return rounded ? static_cast<double>(round16(v, f16)) : static_cast<double>(v); };
  double worst = 0;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> want(static_cast<size_t>(H), 0.0), scale(static_cast<size_t>(H), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = r.ids[static_cast<size_t>(t * k + j)];
      const double w = r.weights[static_cast<size_t>(t * k + j)];
      if (e < 0 || e >= g.E) continue;
      std::vector<double> xt(static_cast<size_t>(H));
      for (int64_t c = 0; c < H; ++c) xt[static_cast<size_t>(c)] = rd(x[static_cast<size_t>(t * H + c)]);
      if (rounding == Rounding::Int8) xt = int8_values(xt);
      std::vector<double> act(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double gs = 0, us = 0;
        for (int64_t c = 0; c < H; ++c) {
          const double xv = xt[static_cast<size_t>(c)];
          gs += xv * rd(g.gate_up_f[static_cast<size_t>((e * 2 * I + i) * H + c)]);
          us += xv * rd(g.gate_up_f[static_cast<size_t>((e * 2 * I + I + i) * H + c)]);
        }
        act[static_cast<size_t>(i)] = rd(static_cast<float>(gs / (1.0 + std::exp(-gs)) * us));
      }
      if (rounding == Rounding::Int8) act = int8_values(act);
      for (int64_t c = 0; c < H; ++c) {
        double s = 0, mag = 0;
        for (int64_t i = 0; i < I; ++i) {
          const double p = act[static_cast<size_t>(i)] * rd(g.down_f[static_cast<size_t>((e * H + c) * I + i)]);
          s += p;
          mag += std::abs(p);
        }
        want[static_cast<size_t>(c)] += w * s;
        scale[static_cast<size_t>(c)] += std::abs(w) * mag;
      }
    }
    for (int64_t c = 0; c < H; ++c) {
      const double err =
          std::abs(got[static_cast<size_t>(t * H + c)] - want[static_cast<size_t>(c)]) / (scale[static_cast<size_t>(c)] + 1e-30);
      worst = std::max(worst, err);
    }
  }
  return worst;
}

// Stored dtypes; Q8_0, Q4_0, Q4_1 and Q4_K upload as Q8_0R, Q4_0R, Q4_1R and Q4_KR in Fast.
constexpr DType kDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,
                             DType::Q6_K};

TEST(CudaMoeExperts, GemvStepsEqualAFloat64Sum) {
  SKIP_WITHOUT_GPU();
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Fast, ops::QuantizedMatmul::Exact}) {
    NumericsScope scope(mode);
    for (DType stored : kDtypes) {
      GpuExperts g(16, 256, 512, stored, 5);
      const DType t = g.t;
      for (int64_t n : {1, 3, 8}) {
        const int64_t k = 4;
        const auto x = random_floats(static_cast<size_t>(n * g.H), 7);
        const Routing r = random_routing(n, k, g.E, 9);
        const auto got = gpu_experts(g, x, r, k);
        // Fast runs the GPU row layouts with int8 activations (moe_gemv_int8.cu): against
        // a reference that rounds x and act the same way, within F32 accumulation plus the
        // rare act value whose int8 rounding flips between the F32 and float64 act (one
        // quantum of one value, ~1e-4 of the scale); a wrong expert, row or minimum term is
        // off by the output's own size. Against the unrounded sum it must differ (the path ran).
        // Without int8 (Q4_K's GGUF layout, or CORVID_NO_DP4A=1) Fast decodes the affine
        // formats Q4_1R/Q4_K/Q4_KR in f16 arithmetic (as the prompt GEMMs): rounding those
        // weights to f16 is within 2e-3; Exact decodes every format in F32.
        const bool int8 = mode == ops::QuantizedMatmul::Fast && std::getenv("CORVID_NO_DP4A") == nullptr &&
                          (t == DType::Q4_0R || t == DType::Q4_1R || t == DType::Q8_0R || t == DType::Q4_KR);
        const bool affine_f16 = mode == ops::QuantizedMatmul::Fast && !int8 &&
                                (t == DType::Q4_1R || t == DType::Q4_K || t == DType::Q4_KR);
        const double err = worst_error(g, x, r, k, got, int8 ? Rounding::Int8 : Rounding::None, true);
        ASSERT_LE(err, int8 ? 3e-4 : affine_f16 ? 2e-3 : 1e-5) << dtype_name(t) << " n=" << n;
        if (int8) {
          EXPECT_GT(worst_error(g, x, r, k, got, Rounding::None, true), 2e-5) << dtype_name(t) << " n=" << n;
        }
        if (n == 8)
          std::printf("cuda moe gemv %-6s %-5s max err / scale = %.3g\n", std::string(dtype_name(t)).c_str(),
                      mode == ops::QuantizedMatmul::Fast ? "fast" : "exact", err);
      }
    }
  }
}

TEST(CudaMoeExperts, GroupedGemmEqualsAFloat64SumOfRoundedOperands) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  for (DType stored : kDtypes) {
    GpuExperts g(16, 256, 256, stored, 11);
    const DType t = g.t;
    // 9 tokens: one partial tile per expert; 300 x 4 = 1200 pairs: several tiles for most.
    for (int64_t n : {9, 300}) {
      const int64_t k = 4;
      const auto x = random_floats(static_cast<size_t>(n * g.H), 13);
      const Routing r = random_routing(n, k, g.E, 15);
      const auto got = gpu_experts(g, x, r, k);
      const bool f16 = t == DType::F16 || is_quantized(t);
      const double err = worst_error(g, x, r, k, got, Rounding::Half, f16);
      // Beyond the operands' rounding: act rounded to 16 bits from an F32 that itself
      // differs from the float64 act in the last bits, and F32 accumulation.
      ASSERT_LE(err, f16 ? 2e-3 : 8e-3) << dtype_name(t) << " n=" << n;
      std::printf("cuda moe gemm %-6s n=%-3lld max err / scale = %.3g\n", std::string(dtype_name(t)).c_str(),
                  static_cast<long long>(n), err);
    }
  }
}

// A token's output does not depend on its step's other tokens: token 0 alone is one
// kind of step, token 0 among others the same kind, and those must agree bit for bit.
TEST(CudaMoeExperts, ATokensOutputIgnoresTheOtherTokens) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  for (DType stored : {DType::BF16, DType::Q8_0, DType::Q4_0}) {
    // Q8_0 rows of 128 and 64 values (136 and 68 bytes) keep the GGUF layout; Q4_0 rows of
    // 256 values upload as Q4_0R, whose decode steps take the int8 GEMVs.
    const bool q4 = stored == DType::Q4_0;
    GpuExperts g(8, q4 ? 256 : 128, q4 ? 256 : 64, stored, 21);
    const DType t = g.t;
    const int64_t k = 2, H = g.H;
    for (const auto& [small, large] : {std::pair<int64_t, int64_t>{2, 8}, {9, 200}}) {
      const auto xa = random_floats(static_cast<size_t>(large * H), 23);
      auto xb = random_floats(static_cast<size_t>(small * H), 24);
      std::copy_n(xa.begin(), H, xb.begin());  // token 0 is the same in both steps
      Routing ra = random_routing(large, k, g.E, 25), rb = random_routing(small, k, g.E, 26);
      std::copy_n(ra.ids.begin(), k, rb.ids.begin());
      std::copy_n(ra.weights.begin(), k, rb.weights.begin());
      const auto a = gpu_experts(g, xa, ra, k), b = gpu_experts(g, xb, rb, k);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), static_cast<size_t>(H) * sizeof(float)))
          << dtype_name(t) << " steps of " << small << " and " << large;
      // Written over x (the block without a shared expert): the same bits.
      EXPECT_EQ(gpu_experts(g, xa, ra, k, true), a) << dtype_name(t) << " in place, " << large << " tokens";
    }
  }
}

// An expert id outside [0, E) adds nothing on the GPU (a recorded step cannot throw).
TEST(CudaMoeExperts, AnOutOfRangeExpertAddsNothing) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  GpuExperts g(4, 64, 32, DType::F32, 31);
  for (int64_t n : {2, 20}) {
    const int64_t k = 2;
    const auto x = random_floats(static_cast<size_t>(n * g.H), 33);
    Routing r = random_routing(n, k, g.E, 35);
    Routing bad = r;
    for (int64_t t = 0; t < n; ++t) {
      bad.ids[static_cast<size_t>(t * k + 1)] = t % 2 ? 4 : -1;
      r.weights[static_cast<size_t>(t * k + 1)] = 0.0f;
    }
    const auto want = gpu_experts(g, x, r, k), got = gpu_experts(g, x, bad, k);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << n;
  }
}

TEST(CudaMoe, SigmoidGateAddMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 5, H = 96;
  const auto xv = random_floats(static_cast<size_t>(n * H), 41), yv = random_floats(xv.size(), 42),
             gv = random_floats(static_cast<size_t>(n), 43, 4.0f);
  OwnedTensor x = f32_tensor({n, H}, xv), y = f32_tensor({n, H}, yv), gate = f32_tensor({n, 1}, gv);
  OwnedTensor out = f32_tensor({n, H}, std::vector<float>(xv.size()));
  ops::sigmoid_gate_add(x.tensor, gate.tensor, y.tensor, out.tensor);
  DeviceTensor gx = to_gpu(x.tensor), gy = to_gpu(y.tensor), gg = to_gpu(gate.tensor);
  ops::sigmoid_gate_add(gx.tensor, gg.tensor, gy.tensor, gx.tensor);  // out may alias x
  const auto got = to_host(gx.tensor);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], out.tensor.ptr<float>()[i], 1e-6 * (1 + std::abs(got[i])));
}

}  // namespace
}  // namespace corvid
