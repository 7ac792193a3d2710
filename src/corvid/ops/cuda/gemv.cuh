// Device helpers shared by the GEMV kernels of matmul.cu, gemv_tiled.cu and gemv_dp4a.cu.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

__device__ __forceinline__ float bias_at(const void* bias, DType t, int64_t i) {
  if (!bias) return 0.0f;
  if (t == DType::F32) return static_cast<const float*>(bias)[i];
  const uint16_t v = static_cast<const uint16_t*>(bias)[i];
  return t == DType::F16 ? half_to_float(v) : bf16_to_float(v);
}

// cp.async: 16 bytes global -> shared without a register round trip; commit/wait in groups.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ float gemv_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The end of a GEMV block that kept kRows x NC partial dot products per thread: each is
// summed over the block (warp shuffles, then the kWarps warps' sums through `partial`,
// shared memory of [kWarps][kRows * NC]) and out[c, row0 + r] (+ bias) written for
// r < rows, c < a.n. Every thread of the block must call it (it synchronises once).
template <int kRows, int NC, int kWarps>
__device__ __forceinline__ void gemv_block_store(const float (&acc)[kRows][NC], float (*partial)[kRows * NC],
                                                 const GemvArgs& a, int64_t row0, int rows) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float v = gemv_warp_sum(acc[r][c]);
      if (lane == 0) partial[warp][r * NC + c] = v;
    }
  __syncthreads();
  if (tid < kRows * NC) {
    const int r = tid / NC, c = tid % NC;
    if (r < rows && c < a.n) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += partial[w][tid];
      const int64_t row = row0 + r;
      a.out[c * a.m + row] = s + bias_at(a.bias, a.bias_dtype, row);
    }
  }
}

// 8 bytes at a 2-byte-aligned shared-memory address, as two little-endian words.
__device__ __forceinline__ uint2 load8_align2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16), h[2] | (static_cast<uint32_t>(h[3]) << 16));
}

}  // namespace corvid::ops::cuda
