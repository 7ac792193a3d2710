// TurboQuant's scalar codes (the MSE variant): the KV cache formats T4G64, T3G64 and
// T2G64 (core/dtype.h), which code groups of values already in a rotated basis
// (ops::hadamard_rotate; the attention layer rotates before the store).
//
// After a random rotation, the coordinates of a head's vector scaled to norm √d follow
// the distribution of one coordinate of a uniformly random point on the sphere of radius
// √d: density ∝ (1 - x²/d)^((d-3)/2), close to N(0, 1). A b-bit Lloyd-Max codebook for
// that density (the 2^b centroids and cells that minimise the expected squared error)
// codes each coordinate. A group of 64 values keeps its codes (b bits each, packed as a
// little-endian bit stream) and one f32 scale s = |x| / |c| where c is the centroids the
// codes name, so the decoded group s * c has x's norm (the norm correction).
//
// The arithmetic is f32 in a fixed order that a GPU warp reproduces (two values a lane,
// then a butterfly), so the CUDA store writes the CPU's bytes: |x|² and |c|² are
// group_sum's tree of squares, u = x * (8 / |x|) picks the code (how many boundaries lie
// below u), s = |x| / sqrt(|c|²).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/dtype.h"

namespace corvid::ops::kv_turbo {

inline constexpr int kGroup = 64;

// The codebook for 2^bits levels (bits 2, 3 or 4): centroids ascending and the 2^bits - 1
// cell boundaries (midpoints of neighbouring centroids), from ops/turbo_codebooks.h.
struct Codebook {
  std::span<const float> centroids;
  std::span<const float> bounds;
  double distortion;  // expected squared error per coordinate (unit variance)
};
const Codebook& codebook(int bits);

// Lloyd's iteration for 2^bits levels on the sphere-coordinate density in kGroup
// dimensions, in double: what ops/turbo_codebooks.h holds, rounded to float.
struct DerivedCodebook {
  std::vector<double> centroids, bounds;
  double distortion = 0;
};
DerivedCodebook derive_codebook(int bits);

// Whether t is a TurboQuant format, and its bits per code.
bool is_turbo(DType t);
int bits_of(DType t);

// Bytes of one coded group: 64 * bits / 8 of codes, then the f32 scale.
inline constexpr int group_bytes(int bits) { return kGroup * bits / 8 + 4; }

// The sum of 64 floats in the order a warp adds them (two a lane, then a butterfly):
// a[j] = p[j] + p[j + 32], then a[j] += a[j + k] for k = 16, 8, 4, 2, 1.
float group_sum(const float* p);

// n values (whole groups of 64) into n / 64 * group_bytes(bits) bytes at dst, and back.
void quantize(int bits, const float* x, int64_t n, uint8_t* dst);
void dequantize(int bits, const uint8_t* src, int64_t n, float* out);

}  // namespace corvid::ops::kv_turbo
