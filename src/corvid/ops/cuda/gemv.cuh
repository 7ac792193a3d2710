// Device helpers shared by the GEMV kernels of matmul.cu, gemv_tiled.cu and gemv_dp4a.cu.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/cuda/ptx.cuh"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/glu.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

__device__ __forceinline__ float bias_at(const void* bias, DType t, int64_t i) {
  if (!bias) return 0.0f;
  if (t == DType::F32) return static_cast<const float*>(bias)[i];
  const uint16_t v = static_cast<const uint16_t*>(bias)[i];
  return t == DType::F16 ? half_to_float(v) : bf16_to_float(v);
}

// Elements and bytes per block of the formats the tiled GEMVs stage (float types: one
// element of 2 bytes).
template <DType T>
struct GemvFormat;
template <>
struct GemvFormat<DType::F16> { static constexpr int kElems = 1, kBytes = 2; };
template <>
struct GemvFormat<DType::BF16> { static constexpr int kElems = 1, kBytes = 2; };
template <>
struct GemvFormat<DType::Q8_0> { static constexpr int kElems = 32, kBytes = kQ8_0Bytes; };
template <>
struct GemvFormat<DType::Q4_0> { static constexpr int kElems = 32, kBytes = kQ4_0Bytes; };
template <>
struct GemvFormat<DType::Q4_1> { static constexpr int kElems = 32, kBytes = kQ4_1Bytes; };
template <>
struct GemvFormat<DType::Q4_K> { static constexpr int kElems = 256, kBytes = kQ4_KBytes; };
template <>
struct GemvFormat<DType::Q6_K> { static constexpr int kElems = 256, kBytes = kQ6_KBytes; };

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
      const float v = warp_sum(acc[r][c]);
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

// gemv_block_store for a block whose rows are kRows / 2 gate rows, then their up rows
// (one token): sums each row the same way, then writes out[row0 + i] = act(gate_i) * up_i
// for i < rows (kGelu: gelu_tanh, else silu).
template <int kRows, int kWarps, bool kGelu>
__device__ __forceinline__ void gemv_block_store_glu(const float (&acc)[kRows][1], float (*partial)[kRows],
                                                     float* out, int64_t row0, int rows) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float v = warp_sum(acc[r][0]);
    if (lane == 0) partial[warp][r] = v;
  }
  __syncthreads();
  if (tid < rows) {
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      gate += partial[w][tid];
      up += partial[w][tid + kRows / 2];
    }
    out[row0 + tid] = kGelu ? gelu_tanh_times(gate, up) : silu_times(gate, up);
  }
}

// 8 bytes at a 2-byte-aligned shared-memory address, as two little-endian words.
__device__ __forceinline__ uint2 load8_align2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16), h[2] | (static_cast<uint32_t>(h[3]) << 16));
}

// A small unsigned integer (< 2^23) as an exact float without the (slow) int-to-float
// converter: placed in the mantissa of 2^23 it is the float 2^23 + v.
__device__ __forceinline__ float small_uint_to_float(uint32_t v) {
  return __uint_as_float(0x4B000000u | v) - 8388608.0f;
}

// Q4_K's 6-bit scale and minimum of sub-block j (0..7), its 12 packed scale bytes given
// as three little-endian words (the packing quant.cuh's k_scale_min reads bytewise).
// Branch-free: the lanes of a warp hold both halves of j's range.
__device__ __forceinline__ void k_scale_min_words(uint32_t w0, uint32_t w1, uint32_t w2, int j, uint32_t& sc,
                                                  uint32_t& mn) {
  const int shift = (j & 3) * 8;
  const uint32_t b0 = (w0 >> shift) & 0xFF, b1 = (w1 >> shift) & 0xFF, b2 = (w2 >> shift) & 0xFF;
  sc = j < 4 ? (b0 & 63) : ((b2 & 0xF) | ((b0 >> 6) << 4));
  mn = j < 4 ? (b1 & 63) : ((b2 >> 4) | ((b1 >> 6) << 4));
}

// Group g (values 8g..8g+7) of a row's blocks in a shared-memory tile (the row's first
// byte at `tile`), for the tiled GEMVs: the 8 quants as the bytes of v (two words) and the
// group's weights as a * (q - group_zero<T>) + b. Q8_0's quants are signed bytes.
template <DType T>
constexpr int group_zero = T == DType::Q4_0 ? 8 : T == DType::Q6_K ? 32 : 0;

template <DType T>
__device__ __forceinline__ void group_quants(const uint8_t* tile, int g, uint2& v, float& a, float& b) {
  b = 0.0f;
  if constexpr (T == DType::Q8_0) {
    // 34-byte blocks: d (f16), 32 int8. Group p of a block is quants 8p..8p+7.
    const uint8_t* blk = tile + (g >> 2) * kQ8_0Bytes;
    a = half_to_float(load_u16(blk));
    v = load8_align2(blk + 2 + 8 * (g & 3));
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
    // Value j < 16 is the low nibble of qs[j], value j + 16 its high nibble:
    // group p reads qs[8(p%2) ..] and takes the nibble p/2.
    constexpr int bytes = T == DType::Q4_0 ? kQ4_0Bytes : kQ4_1Bytes, qs_at = T == DType::Q4_0 ? 2 : 4;
    const uint8_t* blk = tile + (g >> 2) * bytes;
    const int p = g & 3;
    a = half_to_float(load_u16(blk));
    if constexpr (T == DType::Q4_1) b = half_to_float(load_u16(blk + 2));
    const uint2 raw = load8_align2(blk + qs_at + 8 * (p & 1));
    const int shift = (p >> 1) * 4;
    v = make_uint2((raw.x >> shift) & 0x0F0F0F0Fu, (raw.y >> shift) & 0x0F0F0F0Fu);
  } else if constexpr (T == DType::Q4_K) {
    // 144-byte super-blocks: d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 bytes of
    // nibbles; value w: chunk w/64, nibble (w%64)/32, byte 32*chunk + w%32.
    const uint8_t* sb = tile + (g >> 5) * kQ4_KBytes;
    const int gi = g & 31, chunk = gi >> 3, hi = (gi >> 2) & 1, l0 = (gi & 3) * 8;
    const uint2 raw = *reinterpret_cast<const uint2*>(sb + 16 + chunk * 32 + l0);  // 8-byte aligned
    const int shift = hi * 4;
    v = make_uint2((raw.x >> shift) & 0x0F0F0F0Fu, (raw.y >> shift) & 0x0F0F0F0Fu);
    const uint32_t* sw = reinterpret_cast<const uint32_t*>(sb + 4);  // 4-byte aligned
    uint32_t sc, mn;
    k_scale_min_words(sw[0], sw[1], sw[2], 2 * chunk + hi, sc, mn);
    a = half_to_float(load_u16(sb)) * small_uint_to_float(sc);
    b = -half_to_float(load_u16(sb + 2)) * small_uint_to_float(mn);
  } else {
    static_assert(T == DType::Q6_K, "unsupported format");
    // 210-byte super-blocks: ql[128], qh[64], int8 scales[16], d (f16). Value w:
    // half w/128, quarter (w%128)/32, l = w%32: low 4 bits from ql[64 half + l + 32 (quarter%2)]
    // (nibble quarter/2), high 2 bits from qh[32 half + l] >> 2 quarter, scale l/16 + 2 quarter.
    const uint8_t* sb = tile + (g >> 5) * kQ6_KBytes;
    const int gi = g & 31, half = gi >> 4, quarter = (gi >> 2) & 3, l0 = (gi & 3) * 8;
    const uint2 lo = load8_align2(sb + half * 64 + l0 + (quarter & 1) * 32);
    const uint2 hi = load8_align2(sb + 128 + half * 32 + l0);
    const int lshift = (quarter >> 1) * 4, hshift = 2 * quarter;
    v = make_uint2(((lo.x >> lshift) & 0x0F0F0F0Fu) | (((hi.x >> hshift) & 0x03030303u) << 4),
                   ((lo.y >> lshift) & 0x0F0F0F0Fu) | (((hi.y >> hshift) & 0x03030303u) << 4));
    const int8_t sc = static_cast<int8_t>(sb[192 + half * 8 + (l0 >> 4) + 2 * quarter]);
    a = half_to_float(load_u16(sb + 208)) * static_cast<float>(sc);
  }
}

}  // namespace corvid::ops::cuda
