// Elements of a KV cache on the GPU: F32, or F16 / BF16, which halve the bytes decode
// attention reads and the memory a token of context takes (the coded formats, q8 / q4 /
// fp8, are kv_codec.cuh's). Kernels are templates over
// the element type E (float, KvF16 or KvBf16); the overloads below read any of them
// as floats and write a float as one (round to nearest even), so one kernel body
// serves every cache dtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/core/error.h"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

struct KvF16 {
  uint16_t bits;
};
struct KvBf16 {
  uint16_t bits;
};

__device__ __forceinline__ float kv_float(float v) { return v; }
__device__ __forceinline__ float kv_float(KvF16 v) { return half_to_float(v.bits); }
__device__ __forceinline__ float kv_float(KvBf16 v) { return bf16_to_float(v.bits); }

template <class E>
__device__ __forceinline__ E kv_encode(float v) {
  if constexpr (sizeof(E) == 4) {
    return v;
  } else if constexpr (__is_same(E, KvF16)) {
    return KvF16{__half_as_ushort(__float2half_rn(v))};
  } else {
    return KvBf16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  }
}

// The elements packed in one 32-bit word of a cache row (one F32, two F16/BF16), as floats.
template <class E>
__device__ __forceinline__ void kv_unpack(uint32_t word, float (&out)[4 / sizeof(E)]) {
  if constexpr (sizeof(E) == 4) {
    out[0] = __uint_as_float(word);
  } else {
    out[0] = kv_float(E{static_cast<uint16_t>(word & 0xFFFF)});
    out[1] = kv_float(E{static_cast<uint16_t>(word >> 16)});
  }
}

// Four consecutive elements (p aligned to four of them: 16 bytes of F32, 8 of F16/BF16).
__device__ __forceinline__ float4 kv_load4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
template <class E>
__device__ __forceinline__ float4 kv_load4(const E* p) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
  return make_float4(kv_float(E{static_cast<uint16_t>(u.x & 0xFFFF)}), kv_float(E{static_cast<uint16_t>(u.x >> 16)}),
                     kv_float(E{static_cast<uint16_t>(u.y & 0xFFFF)}), kv_float(E{static_cast<uint16_t>(u.y >> 16)}));
}

// Whether t is one of these (the coded formats are in kv_codec.cuh).
inline bool kv_dtype_is_plain(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Calls f(E{}) with the element type of cache dtype t.
template <class F>
void dispatch_kv_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F16: f(KvF16{}); return;
    case DType::BF16: f(KvBf16{}); return;
    default: fail("CUDA attention: KV cache dtype ", dtype_name(t), " is not supported (F32, F16, BF16)");
  }
}

}  // namespace corvid::ops::cuda
