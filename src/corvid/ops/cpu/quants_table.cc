// The per-dtype kernel table: which activation format each weight format pairs
// with, and the fastest compiled vec_dot (SIMD when built with AVX2).
#include "corvid/core/error.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

namespace {
inline VecDotFn best(VecDotFn simd_fn, VecDotFn scalar_fn) { return simd_fn ? simd_fn : scalar_fn; }
}  // namespace

const QuantKernels& quant_kernels(DType t) {
  static const QuantKernels kQ4_0{DType::Q8_0, dequantize_row_q4_0, quantize_row_q4_0,
                                  best(kVecDotQ4_0Simd, vec_dot_q4_0_q8_0_scalar), vec_dot_q4_0_q8_0_scalar};
  static const QuantKernels kQ4_1{DType::Q8_1, dequantize_row_q4_1, quantize_row_q4_1,
                                  best(kVecDotQ4_1Simd, vec_dot_q4_1_q8_1_scalar), vec_dot_q4_1_q8_1_scalar};
  static const QuantKernels kQ5_0{DType::Q8_0, dequantize_row_q5_0, quantize_row_q5_0,
                                  best(kVecDotQ5_0Simd, vec_dot_q5_0_q8_0_scalar), vec_dot_q5_0_q8_0_scalar};
  static const QuantKernels kQ5_1{DType::Q8_1, dequantize_row_q5_1, quantize_row_q5_1,
                                  best(kVecDotQ5_1Simd, vec_dot_q5_1_q8_1_scalar), vec_dot_q5_1_q8_1_scalar};
  static const QuantKernels kQ8_0{DType::Q8_0, dequantize_row_q8_0, quantize_row_q8_0,
                                  best(kVecDotQ8_0Simd, vec_dot_q8_0_q8_0_scalar), vec_dot_q8_0_q8_0_scalar};
  static const QuantKernels kQ4_K{DType::Q8_K, dequantize_row_q4_k, quantize_row_q4_k,
                                  best(kVecDotQ4_KSimd, vec_dot_q4_k_q8_k_scalar), vec_dot_q4_k_q8_k_scalar};
  static const QuantKernels kQ5_K{DType::Q8_K, dequantize_row_q5_k, quantize_row_q5_k,
                                  best(kVecDotQ5_KSimd, vec_dot_q5_k_q8_k_scalar), vec_dot_q5_k_q8_k_scalar};
  static const QuantKernels kQ6_K{DType::Q8_K, dequantize_row_q6_k, quantize_row_q6_k,
                                  best(kVecDotQ6_KSimd, vec_dot_q6_k_q8_k_scalar), vec_dot_q6_k_q8_k_scalar};
  static const QuantKernels kQ8_1{DType::Q8_1, dequantize_row_q8_1, quantize_row_q8_1, nullptr, nullptr};
  static const QuantKernels kQ8_K{DType::Q8_K, dequantize_row_q8_k, quantize_row_q8_k, nullptr, nullptr};
  switch (t) {
    case DType::Q4_0: return kQ4_0;
    case DType::Q4_1: return kQ4_1;
    case DType::Q5_0: return kQ5_0;
    case DType::Q5_1: return kQ5_1;
    case DType::Q8_0: return kQ8_0;
    case DType::Q4_K: return kQ4_K;
    case DType::Q5_K: return kQ5_K;
    case DType::Q6_K: return kQ6_K;
    case DType::Q8_1: return kQ8_1;
    case DType::Q8_K: return kQ8_K;
    default: fail("quant kernels: ", dtype_name(t), " is not a block-quantized dtype");
  }
}

}  // namespace corvid::ops::cpu
