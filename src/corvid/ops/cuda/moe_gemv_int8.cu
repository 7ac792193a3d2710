// The routed experts' decode GEMVs with int8 activations (contracts in moe_experts.cuh),
// for the GPU row layouts in Fast numerics.
//
// Why: expert_gemv_kernel (moe_experts.cu) gives each output row a warp whose lanes
// decode 8 weights to F32 and FMA them with F32 activations. At the Qwen3-30B-A3B shape
// that is latency-bound: its Q4_0 gate/up read 0.8 TB/s against BF16's 2.9. Here the
// weights are read as gemv_direct.cu reads the dense ones: each lane owns 32-weight units
// (one 16-byte load a row, 32 for Q8_0R) and dots them with the int8 activations through
// dp4a, kRows rows per warp so that every lane has several loads in flight.
//
// gate/up: a block is one (token, slot) pair x kWarps * kRows output rows; a warp's rows
// are kRows gate rows and their kRows up rows of that pair's expert, ending in
// act(gate) * up. down + slot sum: a block is one token x kRows output rows, one warp
// per slot, the slots' sums combined in slot order through shared memory.
//
// Every output is one row's dot product (units in a fixed lane order, then a warp
// shuffle) of its own pair's activations, so a pair's result does not depend on the
// other pairs of the step.
#include <algorithm>
#include <cstdint>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv_units.cuh"
#include "corvid/ops/cuda/moe_experts.cuh"
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kRows = 4;       // output rows a warp (gate/up: kRows gate + kRows up rows)
constexpr int kUpWarps = 4;    // warps of a gate/up block
constexpr int kMaxSlots = 8;   // warps of a down block: one per slot

template <GemvGlu kGlu>
__device__ __forceinline__ float glu_apply(float g, float u) {
  if constexpr (kGlu == GemvGlu::GeluTanh) return gelu_tanh_times(g, u);
  return silu_times(g, u);
}

// acc[r] += row r's dot with the activations over this lane's units (lane, lane + 32, ...),
// the next unit's weights requested while this one is computed.
template <DType T, int R>
__device__ __forceinline__ void rows_dot(const uint8_t* const (&row)[R], const int8_t* qx, const float* dx,
                                         int64_t units, int lane, float (&acc)[R]) {
  WUnit<T> w[R];
  if (lane < units) {
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = load_w<T>(row[r], units, lane);
  }
  for (int64_t u = lane; u < units; u += 32) {
    WUnit<T> next[R];
    if (u + 32 < units) {
#pragma unroll
      for (int r = 0; r < R; ++r) next[r] = load_w<T>(row[r], units, u + 32);
    }
    XUnit x;
    load_x<T>(qx, dx, u, x);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += unit_dot<T>(w[r], x, u);
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = next[r];
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
}

// out[p, row] = act(gate_row . x) * (up_row . x) of pair p's expert, x = int8 row p / a_div.
template <DType T, GemvGlu kGlu>
__global__ void __launch_bounds__(kUpWarps * 32)
    expert_gate_up_int8_kernel(ExpertMatmul a, const int32_t* __restrict__ ids, const int8_t* __restrict__ qx,
                               const float* __restrict__ dx) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t pair = blockIdx.x;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.y) * kUpWarps + warp) * kRows;
  if (row0 >= a.m) return;
  pdl_launch_dependents();
  const int64_t units = a.k / 32;
  pdl_wait();  // ids and x come from earlier kernels
  const int expert = ids[pair];
  float* out = a.out + pair * a.m;
  if (expert < 0 || expert >= a.experts) {
    if (lane < kRows && row0 + lane < a.m) out[row0 + lane] = 0.0f;
    return;
  }
  const uint8_t* row[2 * kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t rr = std::min<int64_t>(row0 + r, a.m - 1);  // past m: repeat the last row, not written
    row[r] = a.w0.base + expert * a.w0.expert_bytes + rr * a.w0.row_bytes;
    row[kRows + r] = a.w1.base + expert * a.w1.expert_bytes + rr * a.w1.row_bytes;
  }
  const int64_t xrow = pair / a.a_div;
  float acc[2 * kRows] = {};
  rows_dot<T, 2 * kRows>(row, qx + xrow * a.k, dx + xrow * units, units, lane, acc);
  if (lane < kRows && row0 + lane < a.m) {
    float g = acc[0], u = acc[kRows];
#pragma unroll
    for (int r = 1; r < kRows; ++r) {
      if (lane == r) g = acc[r], u = acc[kRows + r];
    }
    out[row0 + lane] = glu_apply<kGlu>(g, u);
  }
}

// out[t, row] = sum over slots j in order of weights[t, j] * (down_row of e(t, j) . act(t, j)).
template <DType T>
__global__ void __launch_bounds__(kMaxSlots * 32)
    expert_down_sum_int8_kernel(ExpertMatmul a, const int32_t* __restrict__ ids, const float* __restrict__ weights,
                                int slots, const int8_t* __restrict__ qx, const float* __restrict__ dx,
                                float* __restrict__ out) {
  __shared__ float partial[kMaxSlots][kRows];
  const int lane = threadIdx.x % 32, j = threadIdx.x / 32;
  const int64_t t = blockIdx.x, row0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int64_t units = a.k / 32, pair = t * slots + j;
  pdl_launch_dependents();
  pdl_wait();
  const int expert = ids[pair];
  float acc[kRows] = {};
  if (expert >= 0 && expert < a.experts) {
    const uint8_t* row[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t rr = std::min<int64_t>(row0 + r, a.m - 1);
      row[r] = a.w0.base + expert * a.w0.expert_bytes + rr * a.w0.row_bytes;
    }
    rows_dot<T, kRows>(row, qx + pair * a.k, dx + pair * units, units, lane, acc);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) partial[j][r] = acc[r];
  }
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x);
  if (r < kRows && row0 + r < a.m) {
    float s = 0.0f;
    for (int i = 0; i < slots; ++i) {
      const int64_t p = t * slots + i;
      const int e = ids[p];
      if (e >= 0 && e < a.experts) s += weights[p] * partial[i][r];
    }
    out[t * a.m + row0 + r] = s;
  }
}

template <class Fn>
bool dispatch_row_layout(DType t, Fn&& fn) {
  switch (t) {
    case DType::Q4_0R: fn(std::integral_constant<DType, DType::Q4_0R>{}); return true;
    case DType::Q4_1R: fn(std::integral_constant<DType, DType::Q4_1R>{}); return true;
    case DType::Q8_0R: fn(std::integral_constant<DType, DType::Q8_0R>{}); return true;
    case DType::Q4_KR: fn(std::integral_constant<DType, DType::Q4_KR>{}); return true;
    default: return false;
  }
}

bool aligned(const ExpertWeights& w) {
  return reinterpret_cast<uintptr_t>(w.base) % 16 == 0 && w.row_bytes % 16 == 0 && w.expert_bytes % 16 == 0;
}

}  // namespace

bool expert_int8_supports(const ExpertMatmul& mm, int slots) {
  const bool layout = mm.dtype == DType::Q4_0R || mm.dtype == DType::Q4_1R || mm.dtype == DType::Q8_0R ||
                      mm.dtype == DType::Q4_KR;
  return layout && mm.k % 32 == 0 && mm.k > 0 && mm.m > 0 && aligned(mm.w0) && aligned(mm.w1) && slots >= 1 &&
         slots <= kMaxSlots;
}

void expert_gate_up_int8(const ExpertMatmul& mm, const int32_t* ids, int64_t pairs, const Int8Activations& x,
                         cudaStream_t stream) {
  CORVID_CHECK(mm.glu != GemvGlu::None, "CUDA moe_experts: the int8 gate/up GEMV needs an activation");
  const dim3 grid(static_cast<unsigned>(pairs), blocks_for(mm.m, kUpWarps * kRows));
  const bool known = dispatch_row_layout(mm.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    auto* kernel = mm.glu == GemvGlu::GeluTanh ? expert_gate_up_int8_kernel<T, GemvGlu::GeluTanh>
                                               : expert_gate_up_int8_kernel<T, GemvGlu::Silu>;
    launch_pdl("expert_gate_up_int8_kernel", kernel, grid, dim3(kUpWarps * 32), stream, mm, ids, x.q, x.d);
  });
  CORVID_CHECK(known, "CUDA moe_experts: no int8 GEMV for ", dtype_name(mm.dtype));
}

void expert_down_sum_int8(const ExpertMatmul& mm, const int32_t* ids, const float* weights, int64_t tokens, int slots,
                          const Int8Activations& act, cudaStream_t stream) {
  CORVID_CHECK(mm.glu == GemvGlu::None && mm.a_div == 1 && slots >= 1 && slots <= kMaxSlots,
               "CUDA moe_experts: the int8 down projection takes pairs of 1 to 8 slots");
  const dim3 grid(static_cast<unsigned>(tokens), blocks_for(mm.m, kRows));
  const bool known = dispatch_row_layout(mm.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    launch_pdl("expert_down_sum_int8_kernel", expert_down_sum_int8_kernel<T>, grid, dim3(slots * 32), stream, mm,
               ids, weights, slots, act.q, act.d, mm.out);
  });
  CORVID_CHECK(known, "CUDA moe_experts: no int8 GEMV for ", dtype_name(mm.dtype));
}

}  // namespace corvid::ops::cuda
