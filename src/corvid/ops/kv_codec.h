// The coded KV cache formats, one entry point for all of them: the affine q8/q4 codes
// (ops/kv_affine.h), FP8 (ops/kv_fp8.h) and TurboQuant's codes (ops/kv_turbo.h). A coded cache row is a head's head_dim
// values as whole groups, each group its codes then its scales; the CPU writes rows
// with encode and attention reads them with decode.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"

namespace corvid::ops::kv_codec {

// Whether t is a coded KV format (not a plain F32 / F16 / BF16 element).
bool is_coded(DType t);
// Values per group of a coded format: a head_dim must be a multiple of it.
int group_values(DType t);

// n values (whole groups) of x into bytes_for(t, n) bytes at dst, and back.
void encode(DType t, const float* x, int64_t n, uint8_t* dst);
void decode(DType t, const uint8_t* src, int64_t n, float* out);

}  // namespace corvid::ops::kv_codec
