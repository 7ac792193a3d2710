// Quantizing a decode GEMV's input to int8 activations (gemv.h Int8Activations): per 32
// values d = max|x| / 127, q = nearest-even(x * (1 / d)), all IEEE F32 (the CPU's Fast
// rounding). Both gemv_dp4a.cu's quantize_x_kernel and the ops that produce a GEMV's
// input and write int8 along with it (context.h Int8Rows) go through these, so the GEMV
// sees the same int8 whichever made them.
#pragma once

#include <cstdint>

namespace corvid::ops::cuda {

// Where a kernel writes int8 activations for values [0, count) of its output (q null: it
// does not): value i to q[i], the scale of its 32-value block to d[i / 32].
struct Int8Out {
  int8_t* q = nullptr;
  float* d = nullptr;
};

// The scale of a block whose largest magnitude is amax, and its reciprocal (0 for an
// all-zero block).
__device__ __forceinline__ void int8_scale(float amax, float& d, float& id) {
  d = __fdiv_rn(amax, 127.0f);
  id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
}

// Four consecutive values at index i (a multiple of 4) of an output whose 32-value
// blocks are spread over kLanes consecutive lanes of a warp (kLanes * values per lane =
// 32, the group aligned to kLanes lanes). Every lane of the warp must call it (shuffles);
// `store` false: the lane only helps with the maximum.
template <int kLanes>
__device__ __forceinline__ void store_int8x4(const Int8Out& o, int64_t i, float4 v, bool store) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  float d, id;
  int8_scale(amax, d, id);
  if (!store) return;
  const uint32_t b0 = static_cast<uint8_t>(__float2int_rn(__fmul_rn(v.x, id)));
  const uint32_t b1 = static_cast<uint8_t>(__float2int_rn(__fmul_rn(v.y, id)));
  const uint32_t b2 = static_cast<uint8_t>(__float2int_rn(__fmul_rn(v.z, id)));
  const uint32_t b3 = static_cast<uint8_t>(__float2int_rn(__fmul_rn(v.w, id)));
  *reinterpret_cast<uint32_t*>(o.q + i) = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
  if (i % 32 == 0) o.d[i / 32] = d;
}

// One value at index i of an output whose 32-value blocks are the 32 lanes of a warp.
__device__ __forceinline__ void store_int8(const Int8Out& o, int64_t i, float v, bool store) {
  float amax = fabsf(v);
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  float d, id;
  int8_scale(amax, d, id);
  if (!store) return;
  o.q[i] = static_cast<int8_t>(__float2int_rn(__fmul_rn(v, id)));
  if (i % 32 == 0) o.d[i / 32] = d;
}

}  // namespace corvid::ops::cuda
