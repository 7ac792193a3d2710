// Small AVX2 helpers shared by the SIMD kernels. Only included where __AVX2__ is defined.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>

namespace corvid::ops::cpu::simd {

// acc[i] += sum of the 4 products u8(a[4i..4i+3]) * s8(b[4i..4i+3]).
// VNNI does this in one instruction without saturation; the AVX2 fallback's
// maddubs saturates only when |a| = 255-ish and |b| = 128, which our unsigned
// operands (<= 128) never reach.
inline __m256i dot_u8s8(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, a, b);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, a, b);
#else
  const __m256i p16 = _mm256_maddubs_epi16(a, b);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

// Signed x signed: |a| as the unsigned operand, b with a's sign.
inline __m256i dot_s8s8(__m256i acc, __m256i a, __m256i b) {
  return dot_u8s8(acc, _mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// 16 packed bytes -> 32 nibbles: low nibbles in bytes 0..15, high nibbles in 16..31
// (the ggml element order of a 32-element block).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, byte j = 0x10 if bit j is set else 0 (the fifth bit of Q5 quants).
inline __m256i expand_bits_to_0x10(uint32_t bits) {
  // Broadcast the 4 bytes so byte j holds bits byte j/8, then test bit j%8.
  const __m256i shuf =
      _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0x0000000000000000LL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// exp(x) for 8 floats, within ~2 ulp of expf on [-87, 88] (x is clamped to that range, so
// large negative inputs give ~1e-38 rather than 0). Range reduction x = n ln2 + r with a
// two-part ln2, then a degree-6 polynomial for e^r on |r| <= ln2/2 (Cephes coefficients).
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace corvid::ops::cpu::simd
#endif
