// Rotary embedding arithmetic shared by the rope kernels (elementwise.cu) and decode
// attention that rotates its own q and new key (attention_decode.cu), so both compute
// the same floats as the CPU (elementwise.cc).
#pragma once

#include <cstdint>

namespace corvid::ops::cuda {

// The rotation of pair i at position pos: theta = pos * inv_freq in float, cos and sin
// in double, both times attention_factor (the CPU's arithmetic, elementwise.cc).
__device__ __forceinline__ void rope_cos_sin(int32_t pos, float inv_freq, float attention_factor, float& c, float& s) {
  const float theta = static_cast<float>(pos) * inv_freq;
  c = static_cast<float>(cos(static_cast<double>(theta))) * attention_factor;
  s = static_cast<float>(sin(static_cast<double>(theta))) * attention_factor;
}

// The pair (x0, x1) rotated by the angle whose cosine and sine are c and s. Products
// rounded before the sum: left to itself the compiler fuses one of them into an FMA,
// and which one depends on the kernel around it, so two kernels could rotate alike
// inputs one ulp apart.
__device__ __forceinline__ float2 rotate(float x0, float x1, float c, float s) {
  return make_float2(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)), __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
}

// Element d of a head after rope takes x[d] and x[rope_partner(d)]: pairs (i, i + half)
// (rotate-half) or (2i, 2i + 1) (interleaved); dims past 2 * half pass unchanged (their
// own partner).
__device__ __forceinline__ int rope_partner(int d, int half, bool interleaved) {
  if (d >= 2 * half) return d;
  return interleaved ? d ^ 1 : (d < half ? d + half : d - half);
}

// Element d after rope from xd = x[d] and xp = x[rope_partner(d)], given the pairs'
// cosines and sines (cos_i, sin_i for pair i < half): rotate()'s arithmetic.
__device__ __forceinline__ float rope_element(float xd, float xp, int d, int half, bool interleaved,
                                              const float* cos_i, const float* sin_i) {
  if (d >= 2 * half) return xd;
  const int i = interleaved ? d / 2 : (d < half ? d : d - half);
  const bool first = interleaved ? (d & 1) == 0 : d < half;
  return first ? rotate(xd, xp, cos_i[i], sin_i[i]).x : rotate(xp, xd, cos_i[i], sin_i[i]).y;
}

}  // namespace corvid::ops::cuda
