// The per-dtype kernel table: which activation format each weight format pairs
// with, and the fastest compiled vec_dot (SIMD when built with AVX2).
#include "corvid/core/error.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

namespace {
QuantKernels make(DType act, DequantizeRowFn deq, QuantizeRowFn q, VecDotFn scalar, VecDotFn avx2, VecDotFn avx512) {
  VecDotFn best = avx512 ? avx512 : avx2 ? avx2 : scalar;
  return QuantKernels{act, deq, q, best, scalar, avx2, avx512, nullptr, 0};
}
// The 32-element formats with AVX-512 VNNI: one kernel for every token count
// (gemm_q_avx512.cc), whose one-row form is vec_dot.
QuantKernels make_32(DType act, DequantizeRowFn deq, QuantizeRowFn q, VecDotFn scalar, VecDotFn avx2,
                     VecDotFn gemm_vec_dot, GemmFn gemm) {
  QuantKernels k = make(act, deq, q, scalar, avx2, gemm_vec_dot);
  k.gemm = gemm_vec_dot ? gemm : nullptr;
  k.gemm_min_tokens = 1;
  return k;
}
// The K-quants: the AVX2 single-row kernel and its AVX-512 many-token form, which shares
// its numerics (gemm_k_avx512.cc), so the GEMM is only used beside that kernel.
QuantKernels make_k(DequantizeRowFn deq, QuantizeRowFn q, VecDotFn scalar, VecDotFn avx2, GemmFn gemm) {
  QuantKernels k = make(DType::Q8_K, deq, q, scalar, avx2, nullptr);
  k.gemm = avx2 ? gemm : nullptr;
  k.gemm_min_tokens = 8;  // below that the single-row kernel is as fast, with the same bits
  return k;
}
}  // namespace

const QuantKernels& quant_kernels(DType t) {
  static const QuantKernels kQ4_0 = make_32(DType::Q8_0, dequantize_row_q4_0, quantize_row_q4_0, vec_dot_q4_0_q8_0_scalar,
                                            kVecDotQ4_0Simd, kVecDotGemmQ4_0Avx512, kGemmQ4_0Avx512);
  static const QuantKernels kQ4_1 = make_32(DType::Q8_1, dequantize_row_q4_1, quantize_row_q4_1, vec_dot_q4_1_q8_1_scalar,
                                            kVecDotQ4_1Simd, kVecDotGemmQ4_1Avx512, kGemmQ4_1Avx512);
  static const QuantKernels kQ5_0 = make_32(DType::Q8_0, dequantize_row_q5_0, quantize_row_q5_0, vec_dot_q5_0_q8_0_scalar,
                                            kVecDotQ5_0Simd, kVecDotGemmQ5_0Avx512, kGemmQ5_0Avx512);
  static const QuantKernels kQ5_1 = make_32(DType::Q8_1, dequantize_row_q5_1, quantize_row_q5_1, vec_dot_q5_1_q8_1_scalar,
                                            kVecDotQ5_1Simd, kVecDotGemmQ5_1Avx512, kGemmQ5_1Avx512);
  static const QuantKernels kQ8_0 =
      make_32(DType::Q8_0, dequantize_row_q8_0, kQuantizeQ8_0Simd ? kQuantizeQ8_0Simd : quantize_row_q8_0,
              vec_dot_q8_0_q8_0_scalar, kVecDotQ8_0Simd, kVecDotGemmQ8_0Avx512, kGemmQ8_0Avx512);
  static const QuantKernels kQ4_K =
      make_k(dequantize_row_q4_k, quantize_row_q4_k, vec_dot_q4_k_q8_k_scalar, kVecDotQ4_KSimd, kGemmQ4_KAvx512);
  static const QuantKernels kQ5_K =
      make_k(dequantize_row_q5_k, quantize_row_q5_k, vec_dot_q5_k_q8_k_scalar, kVecDotQ5_KSimd, kGemmQ5_KAvx512);
  static const QuantKernels kQ6_K =
      make_k(dequantize_row_q6_k, quantize_row_q6_k, vec_dot_q6_k_q8_k_scalar, kVecDotQ6_KSimd, kGemmQ6_KAvx512);
  static const QuantKernels kQ8_1{DType::Q8_1,
                                  dequantize_row_q8_1,
                                  kQuantizeQ8_1Simd ? kQuantizeQ8_1Simd : quantize_row_q8_1,
                                  nullptr,
                                  nullptr,
                                  nullptr,
                                  nullptr,
                                  nullptr,
                                  0};
  static const QuantKernels kQ8_K{
      DType::Q8_K, dequantize_row_q8_k, quantize_row_q8_k, nullptr, nullptr, nullptr, nullptr, nullptr, 0};
  switch (t) {
    case DType::Q4_0:
      return kQ4_0;
    case DType::Q4_1:
      return kQ4_1;
    case DType::Q5_0:
      return kQ5_0;
    case DType::Q5_1:
      return kQ5_1;
    case DType::Q8_0:
      return kQ8_0;
    case DType::Q4_K:
      return kQ4_K;
    case DType::Q5_K:
      return kQ5_K;
    case DType::Q6_K:
      return kQ6_K;
    case DType::Q8_1:
      return kQ8_1;
    case DType::Q8_K:
      return kQ8_K;
    default:
      fail("quant kernels: ", dtype_name(t), " is not a block-quantized dtype");
  }
}

}  // namespace corvid::ops::cpu
