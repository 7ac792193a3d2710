// The coded KV cache formats on the GPU (ops/kv_codec.h has the CPU side and the byte
// layout): a head's row is head_dim / group groups, each its codes then its scales.
// Kernels are templates over an element type E (kv_elem.cuh's float / KvF16 / KvBf16,
// or a format tag below); kv_head, kv_value and kv_value4 read a head's values as floats
// whichever E is, so one kernel body serves the plain and the coded caches.
//
// Tags are one byte wide, so that a const E* of a coded cache walks its bytes.
// The stores (kv_store_coded.cu) write the CPU's bytes exactly: the same f16 rounding and
// IEEE divisions for the affine codes, Hopper's satfinite cvt for FP8, TurboQuant's
// group sums in the CPU's tree order.
//
// TurboQuant (turbo:kXvY) gives keys and values their own formats: kernels take EK and
// EV, and dispatch_kv_pair names the pairs the GPU instantiates.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/kv_elem.cuh"
#include "corvid/ops/turbo_codebooks.h"

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

// TurboQuant (ops/kv_turbo.h): 64 kBits-bit Lloyd-Max codes as a little-endian bit
// stream and an f32 scale, value scale * centroid[code].
template <int kBits>
struct KvTurbo {
  uint8_t byte;
  static constexpr int kGroup = 64;
  static constexpr int kCodeBytes = 64 * kBits / 8;
  static constexpr int kBlockBytes = kCodeBytes + 4;
  static constexpr int bits = kBits;
};

template <class E>
inline constexpr bool kv_is_coded = false;
template <int B, int G>
inline constexpr bool kv_is_coded<KvAffine<B, G>> = true;
template <>
inline constexpr bool kv_is_coded<KvFp8> = true;
template <int B>
inline constexpr bool kv_is_coded<KvTurbo<B>> = true;
template <class E>
inline constexpr bool kv_is_turbo = false;
template <int B>
inline constexpr bool kv_is_turbo<KvTurbo<B>> = true;

// TurboQuant's centroids and cell boundaries (ops/turbo_codebooks.h), row bits - 2.
// (Each translation unit has its own copy; they are never written.)
static __constant__ float kTurboCentroids[3][16] = {
    {CORVID_TURBO_CENTROIDS_2}, {CORVID_TURBO_CENTROIDS_3}, {CORVID_TURBO_CENTROIDS_4}};
static __constant__ float kTurboBounds[3][15] = {
    {CORVID_TURBO_BOUNDS_2}, {CORVID_TURBO_BOUNDS_3}, {CORVID_TURBO_BOUNDS_4}};

// Codes i .. i + n - 1 (n * bits <= 16 bits, starting in byte i * bits / 8) of a
// TurboQuant group's bit stream, as one word: code e at bits e * bits.
template <int kBits>
__device__ __forceinline__ uint32_t turbo_codes(const uint8_t* group, int i) {
  const int bit = i * kBits;
  const uint32_t w = group[bit / 8] | (static_cast<uint32_t>(group[bit / 8 + 1]) << 8);
  return w >> (bit % 8);
}
template <int kBits>
__device__ __forceinline__ float turbo_centroid(uint32_t code) {
  return kTurboCentroids[kBits - 2][code & ((1u << kBits) - 1)];
}

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
  if constexpr (__is_same(E, KvFp8) || kv_is_turbo<E>) {
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
    } else if constexpr (kv_is_turbo<E>) {
      return g.s * turbo_centroid<E::bits>(turbo_codes<E::bits>(g.bytes, g.i));
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
    } else if constexpr (kv_is_turbo<E>) {
      constexpr int B = E::bits;
      const uint32_t w = turbo_codes<B>(g.bytes, g.i);  // 4 codes: at most 12 bits past a nibble
      return make_float4(s * turbo_centroid<B>(w), s * turbo_centroid<B>(w >> B), s * turbo_centroid<B>(w >> (2 * B)),
                         s * turbo_centroid<B>(w >> (3 * B)));
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
    case DType::T4G64: f(KvTurbo<4>{}); return;
    case DType::T3G64: f(KvTurbo<3>{}); return;
    case DType::T2G64: f(KvTurbo<2>{}); return;
    default: dispatch_kv_dtype(t, f);
  }
}

// Calls f(EK{}, EV{}) for keys of dtype k and values of dtype v: one format for both, or
// a TurboQuant pair whose values have fewer bits than its keys (ops::kv_cache_pair_supported).
template <class F>
void dispatch_kv_pair(DType k, DType v, F&& f) {
  if (k == v) return dispatch_kv_format(k, [&](auto e) { f(e, e); });
  auto values = [&](auto key) {
    switch (v) {
      case DType::T4G64: if constexpr (decltype(key)::bits > 4) return f(key, KvTurbo<4>{}); break;
      case DType::T3G64: if constexpr (decltype(key)::bits > 3) return f(key, KvTurbo<3>{}); break;
      case DType::T2G64: return f(key, KvTurbo<2>{});
      default: break;
    }
    fail("CUDA attention: keys of ", dtype_name(k), " with values of ", dtype_name(v),
         " (the GPU takes TurboQuant pairs whose values have fewer bits than their keys)");
  };
  switch (k) {
    case DType::A8G64: return values(KvAffine<8, 64>{});
    case DType::T4G64: return values(KvTurbo<4>{});
    case DType::T3G64: return values(KvTurbo<3>{});
    default:
      fail("CUDA attention: keys of ", dtype_name(k), " with values of ", dtype_name(v),
           " (the GPU takes TurboQuant pairs whose values have fewer bits than their keys)");
  }
}

// Encodes n tokens' keys and values (k, v: [n, kv_heads, head_dim] floats on the device)
// into cache rows rows[t] of the coded caches (keys of kt, values of vt; rows[t] < 0: not
// stored), one warp a group (kv_store_coded.cu).
void store_kv_coded(Context& ctx, DType kt, DType vt, const float* k, const float* v, const int32_t* rows, int64_t n,
                    int kv_heads, int head_dim, void* k_cache, void* v_cache);

}  // namespace corvid::ops::cuda
