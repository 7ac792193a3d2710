// The FP8 KV cache format (core/dtype.h F8G64, the CLI's fp8): each group of 64 values
// along head_dim becomes 64 e4m3 codes (OCP "e4m3fn": bias 7, no infinities, largest
// finite ±448) followed by the group's f32 scale s = max|x| / 448, value = s * code.
// Codes round to nearest even and saturate at ±448, as Hopper's cvt instruction does
// (__nv_cvt_float_to_fp8 with __NV_SATFINITE), so the GPU writes the same bytes.
//
// Why a scale per written group rather than per block of the paged pool: a block's scale
// cannot be known before its tokens arrive, and raising it later would re-round codes
// that earlier steps already attended to, so k tokens appended at once would no longer
// give the bits of k one-token steps. A group of a written row never changes.
#pragma once

#include <cstdint>

namespace corvid::ops::kv_fp8 {

inline constexpr int kGroup = 64;
inline constexpr float kMax = 448.0f;

// One float as an e4m3 code: round to nearest even, ±448 beyond, 0x7F for NaN.
uint8_t encode(float x);
// An e4m3 code's value (0x7F / 0xFF: NaN).
float decode(uint8_t code);

// n values (a whole number of groups) of x into n / 64 * 68 bytes at dst.
void quantize(const float* x, int64_t n, uint8_t* dst);
// The inverse: s * code for each of n values.
void dequantize(const uint8_t* src, int64_t n, float* out);

}  // namespace corvid::ops::kv_fp8
