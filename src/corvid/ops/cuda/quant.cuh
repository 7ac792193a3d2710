// Reading weights on the GPU in their stored format: F32/F16/BF16 and the GGUF
// block layouts (byte-compatible with ggml, the same as ops/cpu/quants.h), used
// in place. `element<T>(row, i)` decodes one value of a row of dtype T — simple
// and used where speed does not matter (embedding rows, dequantizing tiles for
// cuBLAS, GEMV of the rarer formats); gemv.cu has whole-block decoders for the
// formats decode speed depends on.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "corvid/core/dtype.h"

namespace corvid::ops::cuda {

__device__ __forceinline__ float half_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// Block sizes in bytes; matmul.cu checks them against dtype_info() before the first launch.
constexpr int kQ4_0Bytes = 18, kQ4_1Bytes = 20, kQ5_0Bytes = 22, kQ5_1Bytes = 24, kQ8_0Bytes = 34;
constexpr int kQ4_KBytes = 144, kQ5_KBytes = 176, kQ6_KBytes = 210;

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block: 6-bit values packed in 12 bytes.
__device__ __forceinline__ void k_scale_min(const uint8_t* s, int j, float& sc, float& mn) {
  if (j < 4) {
    sc = static_cast<float>(s[j] & 63);
    mn = static_cast<float>(s[j + 4] & 63);
  } else {
    sc = static_cast<float>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    mn = static_cast<float>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// A Q4_1R, Q4_K or Q4_KR quant q as the f16 weight of the prompt GEMMs (f16 operands):
// a * q + z with one f16 rounding, a and z f16 (Q4_1R: d and m; Q4_K: k_affine_f16's).
// The tile decoder (gemm_tc.cu) and the wgmma GEMM (gemm_wgmma.cu, on f16 pairs) both
// compute it so, and so give the same bits. (GGUF Q4_1, which only
// layouts the GPU does not rearrange keep, decodes through element<Q4_1> in F32.)
__device__ __forceinline__ float affine_quant_f16(int q, __half a, __half z) {
  return __half2float(__hfma(__int2half_rn(q), a, z));
}
// Q4_K's a and z for a sub-block of scale sc and minimum mn (both exact in F32): d sc and
// -dmin mn, each rounded to f16 (a the low half, z the high).
__device__ __forceinline__ __half2 k_affine_f16(float d, float dmin, float sc, float mn) {
  return __floats2half2_rn(d * sc, -(dmin * mn));
}

// Q4_KR (core/dtype.h): the 16-byte header (d, dmin, packed 6-bit scales and minimums)
// of sub-block u's super-block, which lie behind the row's `units` (k / 32) sub-blocks
// of 16 quant bytes each. Index type and constness as the caller's.
template <class Byte, class I>
__host__ __device__ __forceinline__ Byte* q4_kr_header(Byte* row, I units, I u) {
  return row + 16 * units + 16 * (u >> 3);  // u >= 0: its super-block u / 8
}

// Value i of a row of k values stored as dtype T (row points at the row's first byte;
// only the GPU row layouts, whose scales follow all the quants, need k).
template <DType T>
__device__ __forceinline__ float element(const uint8_t* row, int64_t i, int64_t k) {
  if constexpr (T == DType::Q4_0R || T == DType::Q4_1R || T == DType::Q8_0R) {
    // Quants of block b at b * qbytes (Q8_0R: 32 int8 in order; Q4: value j < 16 the low
    // nibble of byte j, j >= 16 the high nibble of byte j - 16), then the scales.
    constexpr int qbytes = T == DType::Q8_0R ? 32 : 16;
    const int64_t b = i / 32;
    const int j = static_cast<int>(i % 32);
    const uint8_t* scales = row + (k / 32) * qbytes;
    const uint8_t* qs = row + b * qbytes;
    if constexpr (T == DType::Q8_0R) {
      return half_to_float(load_u16(scales + 2 * b)) * static_cast<float>(static_cast<int8_t>(qs[j]));
    } else {
      const int q = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
      if constexpr (T == DType::Q4_0R) return half_to_float(load_u16(scales + 2 * b)) * static_cast<float>(q - 8);
      else return half_to_float(load_u16(scales + 4 * b)) * static_cast<float>(q) + half_to_float(load_u16(scales + 4 * b + 2));
    }
  } else if constexpr (T == DType::Q4_KR) {
    // 16 quant bytes per 32-value sub-block (as Q4_0R), then 16-byte super-block headers.
    const int64_t u = i / 32;
    const int j = static_cast<int>(i % 32);
    const uint8_t* h = q4_kr_header(row, k / 32, u);
    const uint8_t* qs = row + u * 16;
    const int q = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    float sc, mn;
    k_scale_min(h + 4, static_cast<int>(u % 8), sc, mn);
    return half_to_float(load_u16(h)) * sc * static_cast<float>(q) - half_to_float(load_u16(h + 2)) * mn;
  } else if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == DType::F16) {
    return half_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == DType::BF16) {
    return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == DType::Q8_0) {
    const uint8_t* b = row + (i / 32) * kQ8_0Bytes;
    return half_to_float(load_u16(b)) * static_cast<float>(static_cast<int8_t>(b[2 + i % 32]));
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
    constexpr int bytes = T == DType::Q4_0 ? kQ4_0Bytes : kQ4_1Bytes;
    const uint8_t* b = row + (i / 32) * bytes;
    const int j = static_cast<int>(i % 32);
    const uint8_t* qs = b + (T == DType::Q4_0 ? 2 : 4);
    const int q = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    if constexpr (T == DType::Q4_0) return half_to_float(load_u16(b)) * static_cast<float>(q - 8);
    else return half_to_float(load_u16(b)) * static_cast<float>(q) + half_to_float(load_u16(b + 2));
  } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    constexpr int bytes = T == DType::Q5_0 ? kQ5_0Bytes : kQ5_1Bytes;
    constexpr int qh_at = T == DType::Q5_0 ? 2 : 4;
    const uint8_t* b = row + (i / 32) * bytes;
    const int j = static_cast<int>(i % 32);
    const uint32_t qh = static_cast<uint32_t>(b[qh_at]) | (static_cast<uint32_t>(b[qh_at + 1]) << 8) |
                        (static_cast<uint32_t>(b[qh_at + 2]) << 16) | (static_cast<uint32_t>(b[qh_at + 3]) << 24);
    const uint8_t* qs = b + qh_at + 4;
    const int lo = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    const int q = lo | static_cast<int>(((qh >> j) & 1u) << 4);
    if constexpr (T == DType::Q5_0) return half_to_float(load_u16(b)) * static_cast<float>(q - 16);
    else return half_to_float(load_u16(b)) * static_cast<float>(q) + half_to_float(load_u16(b + 2));
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    constexpr int bytes = T == DType::Q4_K ? kQ4_KBytes : kQ5_KBytes;
    const uint8_t* b = row + (i / 256) * bytes;
    const int w = static_cast<int>(i % 256), chunk = w / 64, hi = (w % 64) >= 32, l = w % 32;
    const uint8_t* qs = b + (T == DType::Q4_K ? 16 : 48);
    int q = hi ? (qs[chunk * 32 + l] >> 4) : (qs[chunk * 32 + l] & 0xF);
    if constexpr (T == DType::Q5_K) q += ((b[16 + l] >> (2 * chunk + hi)) & 1) << 4;
    float sc, mn;
    k_scale_min(b + 4, 2 * chunk + hi, sc, mn);
    return half_to_float(load_u16(b)) * sc * static_cast<float>(q) - half_to_float(load_u16(b + 2)) * mn;
  } else if constexpr (T == DType::Q6_K) {
    const uint8_t* b = row + (i / 256) * kQ6_KBytes;
    const int w = static_cast<int>(i % 256), half = w / 128, quarter = (w % 128) / 32, l = w % 32;
    const uint8_t* ql = b + half * 64;
    const uint8_t* qh = b + 128 + half * 32;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + half * 8;
    const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
    const int nib = quarter < 2 ? (lo & 0xF) : (lo >> 4);
    const int q = (nib | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    return half_to_float(load_u16(b + 208)) * static_cast<float>(sc[l / 16 + 2 * quarter]) * static_cast<float>(q);
  } else {
    static_assert(T == DType::F32, "unsupported weight dtype");
    return 0.0f;
  }
}

// Calls fn(std::integral_constant<DType, T>{}) for a weight dtype; false if unsupported.
template <class Fn>
bool dispatch_weight_dtype(DType t, Fn&& fn) {
  switch (t) {
#define CORVID_CASE(X) \
  case DType::X: fn(std::integral_constant<DType, DType::X>{}); return true;
    CORVID_CASE(F32) CORVID_CASE(F16) CORVID_CASE(BF16) CORVID_CASE(Q8_0) CORVID_CASE(Q4_0) CORVID_CASE(Q4_1)
    CORVID_CASE(Q5_0) CORVID_CASE(Q5_1) CORVID_CASE(Q4_K) CORVID_CASE(Q5_K) CORVID_CASE(Q6_K)
    CORVID_CASE(Q4_0R) CORVID_CASE(Q4_1R) CORVID_CASE(Q8_0R) CORVID_CASE(Q4_KR)
#undef CORVID_CASE
    default: return false;
  }
}

}  // namespace corvid::ops::cuda
