// decode8<T>: eight consecutive weights of a row in any GPU weight dtype, as F32: the
// decoder of the tensor-core GEMMs' weight tiles (gemm_tc.cu) and of the MoE experts'
// kernels (moe_experts.cu). Internal to ops/cuda.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

// Values i0 .. i0 + 7 of a row of k values stored as dtype T (i0 a multiple of 8, so
// the eight share one quant block and, in Q4_K/Q6_K, one sub-block scale). The formats
// prefill speed depends on read their eight quants at once (one 8-byte load where the
// layout is 8-byte aligned) and their scale once; the rest decode value by value.
template <DType T>
__device__ __forceinline__ void decode8(const uint8_t* row, uint32_t i0, uint32_t k, float (&v)[8]) {
  if constexpr (T == DType::Q4_0R || T == DType::Q4_1R || T == DType::Q8_0R) {
    constexpr uint32_t qbytes = T == DType::Q8_0R ? 32 : 16;
    const uint32_t b = i0 / 32, j0 = i0 % 32;
    const uint8_t* scales = row + (k / 32) * qbytes;
    if constexpr (T == DType::Q8_0R) {
      const uint2 q = *reinterpret_cast<const uint2*>(row + b * qbytes + j0);
      const float d = half_to_float(load_u16(scales + 2 * b));
#pragma unroll
      for (int e = 0; e < 8; ++e)
        v[e] = d * static_cast<float>(static_cast<int8_t>(((e < 4 ? q.x : q.y) >> (8 * (e % 4))) & 0xFF));
    } else {
      // Value j < 16 is the low nibble of byte j, j >= 16 the high nibble of byte j - 16.
      const uint2 q = *reinterpret_cast<const uint2*>(row + b * qbytes + (j0 % 16));
      const int shift = j0 < 16 ? 0 : 4;
      // The scale (and minimum) once: stores to v may alias them as far as the compiler
      // knows, so loads inside the loop would be repeated per value.
      const uint16_t d_bits = load_u16(scales + (T == DType::Q4_0R ? 2 : 4) * b);
      const float d = half_to_float(d_bits);
      const uint16_t m_bits = T == DType::Q4_1R ? load_u16(scales + 4 * b + 2) : 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int nib = static_cast<int>((((e < 4 ? q.x : q.y) >> (8 * (e % 4))) >> shift) & 0xF);
        if constexpr (T == DType::Q4_0R) {
          v[e] = d * static_cast<float>(nib - 8);
        } else {
          v[e] = affine_quant_f16(nib, __ushort_as_half(d_bits), __ushort_as_half(m_bits));
        }
      }
    }
  } else if constexpr (T == DType::Q4_KR) {
    // Sub-block u = i0 / 32: 16 quant bytes (value j < 16 the low nibble of byte j, j >= 16
    // the high nibble of byte j - 16), its super-block's header behind the row's quants.
    const uint32_t u = i0 / 32, j0 = i0 % 32;
    const uint8_t* h = q4_kr_header(row, k / 32, u);
    const uint2 q = *reinterpret_cast<const uint2*>(row + u * 16 + (j0 % 16));
    const int shift = j0 < 16 ? 0 : 4;
    float sc, mn;
    k_scale_min(h + 4, static_cast<int>(u % 8), sc, mn);
    const float d = half_to_float(load_u16(h)), dmin = half_to_float(load_u16(h + 2));
    const __half2 az = k_affine_f16(d, dmin, sc, mn);
    const __half a = __low2half(az), z = __high2half(az);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int nib = static_cast<int>((((e < 4 ? q.x : q.y) >> (8 * (e % 4))) >> shift) & 0xF);
      v[e] = affine_quant_f16(nib, a, z);
    }
  } else if constexpr (T == DType::Q4_K) {
    const uint8_t* b = row + (i0 / 256) * kQ4_KBytes;
    const uint32_t w = i0 % 256, chunk = w / 64, hi = (w % 64) >= 32, l0 = w % 32;
    const uint2 q = *reinterpret_cast<const uint2*>(b + 16 + chunk * 32 + l0);
    float sc, mn;
    k_scale_min(b + 4, static_cast<int>(2 * chunk + hi), sc, mn);
    const float d = half_to_float(load_u16(b)), dmin = half_to_float(load_u16(b + 2));
    const __half2 az = k_affine_f16(d, dmin, sc, mn);
    const __half a = __low2half(az), z = __high2half(az);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int nib = static_cast<int>((((e < 4 ? q.x : q.y) >> (8 * (e % 4))) >> (hi ? 4 : 0)) & 0xF);
      v[e] = affine_quant_f16(nib, a, z);
    }
  } else if constexpr (T == DType::Q6_K) {
    // 210-byte super-blocks are only 2-byte aligned: byte loads, but the scale and the
    // 8 low/high quant bytes once for the eight values.
    const uint8_t* b = row + (i0 / 256) * kQ6_KBytes;
    const uint32_t w = i0 % 256, half = w / 128, quarter = (w % 128) / 32, l0 = w % 32;
    const uint8_t* ql = b + half * 64 + (quarter & 1) * 32 + l0;
    const uint8_t* qh = b + 128 + half * 32 + l0;
    const float d = half_to_float(load_u16(b + 208)) *
                    static_cast<float>(reinterpret_cast<const int8_t*>(b + 192)[half * 8 + l0 / 16 + 2 * quarter]);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int nib = quarter < 2 ? (ql[e] & 0xF) : (ql[e] >> 4);
      v[e] = d * static_cast<float>((nib | (((qh[e] >> (2 * quarter)) & 3) << 4)) - 32);
    }
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    // One 16-byte load (rows of k % 8 == 0 values are 16-byte aligned).
    const uint4 raw = *reinterpret_cast<const uint4*>(row + static_cast<size_t>(i0) * 2);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const auto lo = static_cast<uint16_t>(words[j] & 0xFFFF), hi = static_cast<uint16_t>(words[j] >> 16);
      v[2 * j] = T == DType::F16 ? half_to_float(lo) : bf16_to_float(lo);
      v[2 * j + 1] = T == DType::F16 ? half_to_float(hi) : bf16_to_float(hi);
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = element<T>(row, static_cast<int>(i0 + e), k);
  }
}

}  // namespace corvid::ops::cuda
