// Writing a prompt GEMM's 16-bit operand along with an F32 output (context.h
// GemmOperand): bf16, or f16 when the GEMM takes f16 (f16 and block-format weights),
// each value rounded to nearest even. gemm_tc.cu rounds x through the same helper, so
// the GEMM reads the same bits whichever made them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "corvid/ops/cuda/context.h"

namespace corvid::ops::cuda {

// Where a kernel writes the 16-bit copy of its output (p null: it does not).
struct HalfOut {
  uint16_t* p = nullptr;
  bool f16 = false;
};

// f16 saturates at its largest finite value (NaN stays NaN): an activation past 65504
// would otherwise become inf, and every output of its GEMM row inf or NaN. (Quantized
// prompt GEMMs take f16, as llama.cpp's; transformers clamps fp16 hidden states the same
// way for models known to overflow.)
__device__ __forceinline__ uint16_t half_bits(float v, bool f16) {
  if (f16) return __half_as_ushort(__float2half_rn(isnan(v) ? v : fminf(fmaxf(v, -65504.0f), 65504.0f)));
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// Values a, b as one 32-bit word (a in the low half: element order in memory).
__device__ __forceinline__ uint32_t half_bits2(float a, float b, bool f16) {
  return half_bits(a, f16) | (static_cast<uint32_t>(half_bits(b, f16)) << 16);
}

// The operand a producer writes along with its output x of rows x cols (as the GEMM
// will see it: [n, heads, head_dim] attention output is n x heads * head_dim), or none.
inline HalfOut half_output(const void* x, int64_t rows, int64_t cols) {
  const Context::GemmOperand& made = context().gemm_operand_output(x, rows, cols);
  return {made.data, made.f16};
}

}  // namespace corvid::ops::cuda
