// GGUF block-quantized formats on the CPU: the block layouts (byte-compatible
// with ggml so GGUF tensors are used in place), reference (scalar) dequantize,
// quantize and dot-product kernels, and SIMD dot products.
//
// A quantized weight row is multiplied with an activation row quantized to the
// matching activation format (QuantKernels::act): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1
// for Q4_1/Q5_1 (its block carries d*sum(q) so the weight's min folds into one
// multiply), Q8_K for the K-quants (its bsums fold in the sub-block mins).
#pragma once

#include <cstddef>
#include <cstdint>

#include "corvid/core/dtype.h"

namespace corvid::ops::cpu {

constexpr int kQK = 32;    // elements per legacy block
constexpr int kQKK = 256;  // elements per K-quant super-block

// Weight x = d * (q - 8), q in 0..15. qs: element j in the low nibble of byte j, j+16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// x = d * q + m, q in 0..15 (nibble order as Q4_0).
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
// x = d * (q - 16), q in 0..31; bit j of qh (little-endian u32) is element j's fifth bit.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
// x = d * q + m, q in 0..31.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// x = d * q, q in -127..127.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// Q8_0 plus s = d * sum(qs) (both f16).
struct BlockQ8_1 {
  uint16_t d, s;
  int8_t qs[32];
};
// 8 sub-blocks of 32: x = d*sc[j]*q - dmin*m[j], 6-bit sc/m packed in `scales`
// (see unpack_scales_k4). qs[32c + l]: low nibble element 64c+l, high nibble 64c+32+l.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// As Q4_K plus a fifth bit: bit 2c of qh[l] for element 64c+l, bit 2c+1 for 64c+32+l.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// 16 groups of 16: x = d * scales[g] * (q - 32), q 6 bits. For half h (128 elements),
// ql += 64h, qh += 32h, l in 0..31: element l: ql[l] low | qh[l] bits 0-1; l+32: ql[l+32] low |
// bits 2-3; l+64: ql[l] high | bits 4-5; l+96: ql[l+32] high | bits 6-7.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Activation format of K-quant dots: float d, q in -127..127, bsums[g] = sum of q over group g of 16.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
              sizeof(BlockQ8_K) == 292);

// Row kernels. k is the row length in elements (a multiple of the block size).
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t k);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t k);
// Dot product of a weight row (block format) with an activation row (format `act`).
using VecDotFn = float (*)(const void* w, const void* x, int64_t k);
// out[t * ldo + r] = vec_dot(w row r, x row t) for r < rows, t < n, bit-identical to vec_dot:
// a matmul over a range of weight rows (w_stride bytes apart) and n activation rows (x_stride
// bytes apart). The AVX-512 forms unpack 16 weight rows at a time into lanes
// (gemm_k_avx512.cc, gemm_q_avx512.cc).
using GemmFn = void (*)(const void* w, size_t w_stride, int64_t rows, const void* x, size_t x_stride, int64_t n,
                        float* out, int64_t ldo, int64_t k);


struct QuantKernels {
  DType act;  // activation format vec_dot expects for x
  DequantizeRowFn dequantize;
  QuantizeRowFn quantize;       // quantizer (test data, activations); SIMD where bit-identical to the reference
  VecDotFn vec_dot;             // fastest available (SIMD where compiled in)
  VecDotFn vec_dot_scalar;      // portable reference, always compiled
  VecDotFn vec_dot_avx2;        // AVX2 (+VNNI) kernel; null when not compiled in
  VecDotFn vec_dot_avx512;      // AVX-512 VNNI kernel (the one-row form of gemm); null when not compiled in
  GemmFn gemm;                  // many-token form of vec_dot; null when vec_dot has none
  int64_t gemm_min_tokens;      // matmul uses gemm from this many tokens (1: always)
};

// Kernels for a quantized dtype (weights and the activation formats Q8_0/Q8_1/Q8_K;
// for the latter vec_dot is null). Throws corvid::Error for non-block dtypes.
const QuantKernels& quant_kernels(DType t);

// 6-bit scale/min j (0..7) of a Q4_K/Q5_K block.
inline void unpack_scale_min_k4(const uint8_t* q, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Scalar kernels (quants_legacy.cc, quants_k.cc).
void dequantize_row_q4_0(const void*, float*, int64_t);
void dequantize_row_q4_1(const void*, float*, int64_t);
void dequantize_row_q5_0(const void*, float*, int64_t);
void dequantize_row_q5_1(const void*, float*, int64_t);
void dequantize_row_q8_0(const void*, float*, int64_t);
void dequantize_row_q8_1(const void*, float*, int64_t);
void dequantize_row_q4_k(const void*, float*, int64_t);
void dequantize_row_q5_k(const void*, float*, int64_t);
void dequantize_row_q6_k(const void*, float*, int64_t);
void dequantize_row_q8_k(const void*, float*, int64_t);
void quantize_row_q4_0(const float*, void*, int64_t);
void quantize_row_q4_1(const float*, void*, int64_t);
void quantize_row_q5_0(const float*, void*, int64_t);
void quantize_row_q5_1(const float*, void*, int64_t);
void quantize_row_q8_0(const float*, void*, int64_t);
void quantize_row_q8_1(const float*, void*, int64_t);
void quantize_row_q4_k(const float*, void*, int64_t);
void quantize_row_q5_k(const float*, void*, int64_t);
void quantize_row_q6_k(const float*, void*, int64_t);
void quantize_row_q8_k(const float*, void*, int64_t);
float vec_dot_q4_0_q8_0_scalar(const void*, const void*, int64_t);
float vec_dot_q4_1_q8_1_scalar(const void*, const void*, int64_t);
float vec_dot_q5_0_q8_0_scalar(const void*, const void*, int64_t);
float vec_dot_q5_1_q8_1_scalar(const void*, const void*, int64_t);
float vec_dot_q8_0_q8_0_scalar(const void*, const void*, int64_t);
float vec_dot_q4_k_q8_k_scalar(const void*, const void*, int64_t);
float vec_dot_q5_k_q8_k_scalar(const void*, const void*, int64_t);
float vec_dot_q6_k_q8_k_scalar(const void*, const void*, int64_t);

// SIMD kernels (quants_avx2.cc, quants_k_avx2.cc); null when not compiled in.
extern const VecDotFn kVecDotQ4_0Simd, kVecDotQ4_1Simd, kVecDotQ5_0Simd, kVecDotQ5_1Simd, kVecDotQ8_0Simd,
    kVecDotQ4_KSimd, kVecDotQ5_KSimd, kVecDotQ6_KSimd;
// SIMD activation quantizers, bit-identical to quantize_row_q8_0/q8_1; null when not compiled in.
extern const QuantizeRowFn kQuantizeQ8_0Simd, kQuantizeQ8_1Simd;
// K-quant prompt GEMMs (gemm_k_avx512.cc), the many-token forms of kVecDotQ*_KSimd; null when not compiled in.
extern const GemmFn kGemmQ4_KAvx512, kGemmQ5_KAvx512, kGemmQ6_KAvx512;
// Matmuls of the 32-element formats for any token count (gemm_q_avx512.cc), and their
// one-row, one-token forms; null when not compiled in.
extern const GemmFn kGemmQ4_0Avx512, kGemmQ4_1Avx512, kGemmQ5_0Avx512, kGemmQ5_1Avx512, kGemmQ8_0Avx512;
extern const VecDotFn kVecDotGemmQ4_0Avx512, kVecDotGemmQ4_1Avx512, kVecDotGemmQ5_0Avx512, kVecDotGemmQ5_1Avx512,
    kVecDotGemmQ8_0Avx512;

}  // namespace corvid::ops::cpu
