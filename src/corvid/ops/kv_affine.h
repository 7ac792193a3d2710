// Affine KV cache formats (core/dtype.h A8G64, A4G64, A8G32, A4G32): each group of 64 or
// 32 values along head_dim becomes 8- or 4-bit codes q with an f16 scale s and bias b,
// value ≈ s * q + b. The arithmetic is mlx's mx.quantize (its CPU kernel) on the values
// rounded to f16, as mlx-lm's QuantizedKVCache quantizes an f16 model's keys and values:
// the same codes, scales and biases bit for bit. A group's bytes are its codes, packed as
// mlx packs them (little-endian 32-bit words, the first value in the lowest bits), then
// the scale and the bias.
#pragma once

#include <cstdint>
#include <optional>

#include "corvid/core/dtype.h"

namespace corvid::ops::kv_affine {

struct Format {
  int bits;   // 8 or 4
  int group;  // 64 or 32 values
  int code_bytes() const { return group * bits / 8; }
};

// The format of an affine KV dtype; nothing for any other dtype.
std::optional<Format> format_of(DType t);
inline bool is_affine(DType t) { return format_of(t).has_value(); }

// n values (a whole number of groups) of x into bytes_for(t, n) bytes at dst.
void quantize(DType t, const float* x, int64_t n, uint8_t* dst);
// The inverse: s * q + b for each of n values.
void dequantize(DType t, const uint8_t* src, int64_t n, float* out);

}  // namespace corvid::ops::kv_affine
