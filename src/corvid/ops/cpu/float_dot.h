// Dot products of a float-format weight row (F32, F16, BF16) with an F32
// activation row, converting the weight on the fly. Same signature as the
// quantized VecDotFn so matmul treats every dtype alike.
#pragma once

#include <cstdint>

#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

float dot_f32_scalar(const void* w, const void* x, int64_t k);
float dot_f16_scalar(const void* w, const void* x, int64_t k);
float dot_bf16_scalar(const void* w, const void* x, int64_t k);
// SIMD versions; null when not compiled in.
extern const VecDotFn kDotF32Simd, kDotF16Simd, kDotBF16Simd;

}  // namespace corvid::ops::cpu
