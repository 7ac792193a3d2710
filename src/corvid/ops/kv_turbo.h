// TurboQuant's scalar codes (the MSE variant), the part of a TurboQuant KV format that
// turns one group of already-rotated values into codes: not yet a cache format of its own
// (the cache side, K and V at separate widths with scores in the rotated domain, is to come).
//
// After a random rotation, the coordinates of a head's vector scaled to norm √d follow
// the distribution of one coordinate of a uniformly random point on the sphere of radius
// √d: density ∝ (1 - x²/d)^((d-3)/2), close to N(0, 1). A b-bit Lloyd-Max codebook for
// that density (the 2^b centroids and cells that minimise the expected squared error)
// codes each coordinate. A group of 64 values keeps its codes (b bits each, packed as a
// little-endian bit stream) and one f32 scale s = |x| / |c| where c is the centroids the
// codes name, so the decoded group s * c has x's norm exactly (the norm correction).
#pragma once

#include <cstdint>
#include <span>

namespace corvid::ops::kv_turbo {

inline constexpr int kGroup = 64;

// The Lloyd-Max codebook for 2^bits levels (bits 2, 3 or 4) of the sphere-coordinate
// density in kGroup dimensions: centroids ascending, and the 2^bits - 1 cell boundaries
// (midpoints of neighbouring centroids). Computed once, deterministically, in double.
struct Codebook {
  std::span<const float> centroids;
  std::span<const float> bounds;
  double distortion;  // expected squared error per coordinate (unit variance)
};
const Codebook& codebook(int bits);

// Bytes of one coded group: 64 * bits / 8 of codes, then the f32 scale.
inline constexpr int group_bytes(int bits) { return kGroup * bits / 8 + 4; }

// n values (whole groups of 64) into n / 64 * group_bytes(bits) bytes at dst, and back.
void quantize(int bits, const float* x, int64_t n, uint8_t* dst);
void dequantize(int bits, const uint8_t* src, int64_t n, float* out);

}  // namespace corvid::ops::kv_turbo
