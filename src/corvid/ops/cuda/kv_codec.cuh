// The coded KV cache formats on the GPU (ops/kv_codec.h has the CPU side and the byte
// layout): a head's row is head_dim / group groups, each its codes then its scales.
// Kernels are templates over an element type E (kv_elem.cuh's float / KvF16 / KvBf16,
// or a format tag below); kv_head, kv_value and kv_value4 read a head's values as floats
// whichever E is, so one kernel body serves the plain and the coded caches.
//
// Tags are one byte wide, so that a const E* of a coded cache walks its bytes.
// The stores (kv_store_coded.cu) write the CPU's bytes exactly: the same f16 rounding and
// IEEE divisions for the affine codes, Hopper's satfinite cvt for FP8.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/kv_elem.cuh"

namespace corvid::ops::cuda {

// Affine codes (ops/kv_affine.h): kBits-bit codes q, f16 scale s and bias b, value s * q + b.
template <int kBits, int kGroup_>
struct KvAffine {
  uint8_t byte;
  static constexpr int kGroup = kGroup_;
  static constexpr int kCodeBytes = kGroup * kBits / 8;
  static constexpr int kBlockBytes = kCodeBytes + 4;
  static constexpr int bits = kBits;
};
// FP8 (ops/kv_fp8.h): 64 e4m3 codes and an f32 scale, value scale * code.
struct KvFp8 {
  uint8_t byte;
  static constexpr int kGroup = 64;
  static constexpr int kCodeBytes = 64;
  static constexpr int kBlockBytes = 68;
  static constexpr int bits = 8;
};

template <class E>
inline constexpr bool kv_is_coded = false;
template <int B, int G>
inline constexpr bool kv_is_coded<KvAffine<B, G>> = true;
template <>
inline constexpr bool kv_is_coded<KvFp8> = true;

// Head kvh of cache row `row`: its elements (plain) or its groups' bytes (coded).
template <class E>
__device__ __forceinline__ const E* kv_head(const E* cache, int64_t row, int kvh, int kv_heads, int head_dim) {
  const int64_t head = row * kv_heads + kvh;
  if constexpr (kv_is_coded<E>) return cache + head * (head_dim / E::kGroup) * E::kBlockBytes;
  else return cache + head * head_dim;
}

__device__ __forceinline__ float fp8_value(uint32_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

// Where value d of a coded head lies: its group's bytes, its index there, and the
// group's scale and bias (fp8: bias 0, unused).
struct CodedGroup {
  const uint8_t* bytes;
  int i;
  float s, b;
};
template <class E>
__device__ __forceinline__ CodedGroup coded_group(const E* head, int d) {
  const uint8_t* group = reinterpret_cast<const uint8_t*>(head) + (d / E::kGroup) * E::kBlockBytes;
  if constexpr (__is_same(E, KvFp8)) {
    return {group, d % E::kGroup, *reinterpret_cast<const float*>(group + E::kCodeBytes), 0.0f};
  } else {
    const __half2 sb = *reinterpret_cast<const __half2*>(group + E::kCodeBytes);
    return {group, d % E::kGroup, __low2float(sb), __high2float(sb)};
  }
}

// Value d of a head kv_head points at.
template <class E>
__device__ __forceinline__ float kv_value(const E* head, int d) {
  if constexpr (kv_is_coded<E>) {
    const CodedGroup g = coded_group(head, d);
    if constexpr (__is_same(E, KvFp8)) {
      return g.s * fp8_value(g.bytes[g.i]);
    } else {
      const uint32_t q = E::bits == 8 ? g.bytes[g.i] : (g.bytes[g.i / 2] >> (4 * (g.i % 2))) & 0xFu;
      return __fadd_rn(__fmul_rn(g.s, static_cast<float>(q)), g.b);
    }
  } else {
    return kv_float(head[d]);
  }
}

// Values d .. d + 3 (d a multiple of 4; for a plain cache, 4-element aligned).
template <class E>
__device__ __forceinline__ float4 kv_value4(const E* head, int d) {
  if constexpr (kv_is_coded<E>) {
    const CodedGroup g = coded_group(head, d);
    const float s = g.s, b = g.b;
    if constexpr (__is_same(E, KvFp8)) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(g.bytes + g.i);
      return make_float4(s * fp8_value(w & 0xFF), s * fp8_value((w >> 8) & 0xFF), s * fp8_value((w >> 16) & 0xFF),
                         s * fp8_value(w >> 24));
    } else {
      uint32_t q[4];
      if constexpr (E::bits == 8) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(g.bytes + g.i);
        for (int e = 0; e < 4; ++e) q[e] = (w >> (8 * e)) & 0xFFu;
      } else {
        const uint32_t w = *reinterpret_cast<const uint16_t*>(g.bytes + g.i / 2);
        for (int e = 0; e < 4; ++e) q[e] = (w >> (4 * e)) & 0xFu;
      }
      auto v = [&](int e) { return __fadd_rn(__fmul_rn(s, static_cast<float>(q[e])), b); };
      return make_float4(v(0), v(1), v(2), v(3));
    }
  } else {
    return kv_load4(head + d);
  }
}

// Calls f(E{}) with the element type or format tag of cache dtype t (every dtype the
// GPU caches hold); dispatch_kv_dtype (kv_elem.cuh) gives the plain ones alone.
template <class F>
void dispatch_kv_format(DType t, F&& f) {
  switch (t) {
    case DType::A8G64: f(KvAffine<8, 64>{}); return;
    case DType::A4G64: f(KvAffine<4, 64>{}); return;
    case DType::A8G32: f(KvAffine<8, 32>{}); return;
    case DType::A4G32: f(KvAffine<4, 32>{}); return;
    case DType::F8G64: f(KvFp8{}); return;
    default: dispatch_kv_dtype(t, f);
  }
}

// Encodes n tokens' keys and values (k, v: [n, kv_heads, head_dim] floats on the device)
// into cache rows rows[t] of the coded caches (rows[t] < 0: not stored), one warp a
// group (kv_store_coded.cu).
void store_kv_coded(Context& ctx, DType t, const float* k, const float* v, const int32_t* rows, int64_t n,
                    int kv_heads, int head_dim, void* k_cache, void* v_cache);

}  // namespace corvid::ops::cuda
