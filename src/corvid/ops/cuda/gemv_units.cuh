// The 32-weight units of the direct-load int8 GEMVs (gemv_direct.cu, moe_gemv_int8.cu):
// one row's 16-byte weight loads for a unit, the unit's int8 activations, and their dot
// product. Unit layouts and the arithmetic are described at the top of gemv_direct.cu.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/gemv.cuh"

namespace corvid::ops::cuda {

constexpr int kLowNibbles = 0x0F0F0F0F;
constexpr int kOnes = 0x01010101;     // dp4a with this sums 4 int8

// 16 weight bytes read once: no L1 allocation, so the activations keep the L1.
__device__ __forceinline__ uint4 load_weight16(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ int dot16(uint4 q, int4 x) {
  return __dp4a(static_cast<int>(q.w), x.w,
                __dp4a(static_cast<int>(q.z), x.z, __dp4a(static_cast<int>(q.y), x.y, __dp4a(static_cast<int>(q.x), x.x, 0))));
}
__device__ __forceinline__ uint4 low_nibbles(uint4 q) {
  return make_uint4(q.x & kLowNibbles, q.y & kLowNibbles, q.z & kLowNibbles, q.w & kLowNibbles);
}
__device__ __forceinline__ uint4 high_nibbles(uint4 q) {
  return make_uint4((q.x >> 4) & kLowNibbles, (q.y >> 4) & kLowNibbles, (q.z >> 4) & kLowNibbles,
                    (q.w >> 4) & kLowNibbles);
}
__device__ __forceinline__ int sum16(int4 x) {
  return __dp4a(x.w, kOnes, __dp4a(x.z, kOnes, __dp4a(x.y, kOnes, __dp4a(x.x, kOnes, 0))));
}

// The activations of one unit for one token.
struct XUnit {
  int4 lo, hi;     // 16 int8 each
  float dlo, dhi;  // scales of the activation blocks lo and hi lie in
  int slo, shi;    // sums of the 16 int8 of lo and hi
};

template <DType T>
constexpr bool kIsK = T == DType::Q4_K;
// Formats whose unit needs sum(qx): a zero point (Q4_0) or a minimum (Q4_1, Q4_K, Q4_KR).
template <DType T>
constexpr bool kNeedsSums = T != DType::Q8_0R;

template <DType T>
__device__ __forceinline__ void load_x(const int8_t* __restrict__ qx, const float* __restrict__ dx, int64_t u,
                                       XUnit& x) {
  int64_t blo, bhi, off;
  if constexpr (kIsK<T>) {
    const int64_t sb = u >> 3;
    const int p = static_cast<int>(u & 7);
    blo = 8 * sb + 2 * (p >> 1);
    bhi = blo + 1;
    off = 16 * (p & 1);
  } else {
    blo = bhi = u;
    off = 0;
  }
  const int8_t* lo = qx + 32 * blo + off;
  const int8_t* hi = kIsK<T> ? qx + 32 * bhi + off : lo + 16;
  x.lo = __ldg(reinterpret_cast<const int4*>(lo));
  x.hi = __ldg(reinterpret_cast<const int4*>(hi));
  x.dlo = __ldg(dx + blo);
  x.dhi = kIsK<T> ? __ldg(dx + bhi) : x.dlo;
  if constexpr (kNeedsSums<T>) {
    x.slo = sum16(x.lo);
    x.shi = sum16(x.hi);
  } else {
    x.slo = x.shi = 0;
  }
}

// One row's bytes for one unit.
template <DType T>
struct WUnit {
  uint4 q0, q1;     // quants (q1: Q8_0R's second half; Q4_K/Q4_KR: the super-block header)
  uint32_t scale;   // Q4_0R/Q8_0R: f16 d; Q4_1R: f16 d | f16 m << 16
};

template <DType T>
__device__ __forceinline__ WUnit<T> load_w(const uint8_t* row, int64_t units, int64_t u) {
  WUnit<T> w;
  if constexpr (T == DType::Q4_KR) {
    w.q0 = load_weight16(row + 16 * u);
    // The 8 units of a super-block share this header (8 lanes of a warp: one request).
    w.q1 = load_weight16(q4_kr_header(row, units, u));
  } else if constexpr (T == DType::Q8_0R) {
    w.q0 = load_weight16(row + 32 * u);
    w.q1 = load_weight16(row + 32 * u + 16);
    w.scale = load_u16(row + 32 * units + 2 * u);
  } else if constexpr (T == DType::Q4_0R) {
    w.q0 = load_weight16(row + 16 * u);
    w.scale = load_u16(row + 16 * units + 2 * u);
  } else if constexpr (T == DType::Q4_1R) {
    w.q0 = load_weight16(row + 16 * u);
    w.scale = *reinterpret_cast<const uint32_t*>(row + 16 * units + 4 * u);
  } else {
    static_assert(T == DType::Q4_K, "unsupported format");
    const uint8_t* sb = row + kQ4_KBytes * (u >> 3);
    const int p = static_cast<int>(u & 7);
    w.q1 = load_weight16(sb);  // d, dmin, 12 bytes of 6-bit scales and minimums
    w.q0 = load_weight16(sb + 16 + 32 * (p >> 1) + 16 * (p & 1));
  }
  return w;
}

// This unit's contribution to one row's dot with one token.
template <DType T>
__device__ __forceinline__ float unit_dot(const WUnit<T>& w, const XUnit& x, int64_t u) {
  if constexpr (T == DType::Q8_0R) {
    const int dot = dot16(w.q0, x.lo) + dot16(w.q1, x.hi);
    return half_to_float(static_cast<uint16_t>(w.scale)) * x.dlo * static_cast<float>(dot);
  } else if constexpr (T == DType::Q4_0R) {
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi) - 8 * (x.slo + x.shi);
    return half_to_float(static_cast<uint16_t>(w.scale)) * x.dlo * static_cast<float>(dot);
  } else if constexpr (T == DType::Q4_1R) {
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi);
    const float d = half_to_float(static_cast<uint16_t>(w.scale & 0xFFFF));
    const float m = half_to_float(static_cast<uint16_t>(w.scale >> 16));
    return x.dlo * fmaf(d, static_cast<float>(dot), m * static_cast<float>(x.slo + x.shi));
  } else if constexpr (T == DType::Q4_KR) {
    // Sub-block u % 8 of the super-block: weights d * sc * q - dmin * mn.
    const float d = half_to_float(static_cast<uint16_t>(w.q1.x & 0xFFFF));
    const float dmin = half_to_float(static_cast<uint16_t>(w.q1.x >> 16));
    uint32_t scale, minimum;
    k_scale_min_words(w.q1.y, w.q1.z, w.q1.w, static_cast<int>(u & 7), scale, minimum);
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi);
    return x.dlo * fmaf(d * small_uint_to_float(scale), static_cast<float>(dot),
                        -dmin * small_uint_to_float(minimum) * static_cast<float>(x.slo + x.shi));
  } else {
    // Sub-blocks j = 2c (low nibbles) and 2c + 1 (high): 6-bit scale and minimum packed
    // in header bytes 4..15 as quant.cuh's k_scale_min reads them.
    const int c = static_cast<int>(u & 7) >> 1;
    const float d = half_to_float(static_cast<uint16_t>(w.q1.x & 0xFFFF));
    const float dmin = half_to_float(static_cast<uint16_t>(w.q1.x >> 16));
    float sc[2], mn[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t scale, minimum;
      k_scale_min_words(w.q1.y, w.q1.z, w.q1.w, 2 * c + h, scale, minimum);
      sc[h] = small_uint_to_float(scale);
      mn[h] = small_uint_to_float(minimum);
    }
    const float lo = fmaf(d * sc[0], static_cast<float>(dot16(low_nibbles(w.q0), x.lo)),
                          -dmin * mn[0] * static_cast<float>(x.slo));
    const float hi = fmaf(d * sc[1], static_cast<float>(dot16(high_nibbles(w.q0), x.hi)),
                          -dmin * mn[1] * static_cast<float>(x.shi));
    return fmaf(x.dlo, lo, x.dhi * hi);
  }
}

}  // namespace corvid::ops::cuda
