// Reductions shared by the CUDA kernels: warp-wide (all 32 lanes take part and all get
// the result) and block-wide in a fixed order, and RMSNorm's scale from a sum of squares.
#pragma once

#include <cstdint>

namespace corvid::ops::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum of v over a block of kThreads threads, every thread getting it: each warp's
// sum, then the warps' sums added in warp order, so the kernels that use it add alike.
// warp_sums: kThreads / 32 floats of shared memory.
template <int kThreads>
__device__ __forceinline__ float block_sum_in_warp_order(float v, float* warp_sums) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  return total;
}

// RMSNorm's scale 1 / sqrt(mean(x^2) + eps) from the row's sum of squares, in double as
// the CPU computes it.
__device__ __forceinline__ float inverse_rms(float sum_squares, int64_t cols, float eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(sum_squares) / static_cast<double>(cols) + eps));
}

}  // namespace corvid::ops::cuda
