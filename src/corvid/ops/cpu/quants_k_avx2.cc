// AVX2 (+VNNI where present) dot products of the K-quant formats with Q8_K.
//
// Performance notes. A super-block has one float scale pair, so all sub-block
// work stays in int32: each 32-element sub-block's u8*s8 dot is multiplied by
// its small integer scale (vpmulld) and accumulated; one int -> float convert and
// FMA per 256 elements. The min terms (Q4_K/Q5_K) and the -32 offset (Q6_K) use
// Q8_K's precomputed 16-element sums (bsums), so they cost one vpmaddwd per
// super-block instead of touching the quants again.
//
// Numerics: every super-block's integer sums are reduced exactly, then
// acc = fma(float(I), d_w * d_x, acc) and (mins) acc = fma(float(-M), dmin_w * d_x, acc), in
// super-block order: the sequence the K-quant prompt GEMM (gemm_k_avx512.cc) runs per lane,
// so a token's prefill and decode results are the same bits.
#include "corvid/ops/cpu/quants.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include <cmath>

#include "corvid/core/half.h"
#include "corvid/ops/cpu/simd.h"

namespace corvid::ops::cpu {

namespace {

using namespace simd;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Unpacks the 8 6-bit scales and mins of a Q4_K/Q5_K block.
inline void scales_mins(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 8; ++j) unpack_scale_min_k4(s, j, &sc[j], &m[j]);
}

// sum_j m[j] * (bsums[2j] + bsums[2j+1]) with one multiply-add of 16 int16 lanes.
inline int min_term(const uint8_t* m, const int16_t* bsums) {
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m));
  // Each min covers two 16-element groups: duplicate it per pair of int16 lanes.
  const __m128i mm = _mm_unpacklo_epi8(m8, m8);
  const __m256i m16 = _mm256_cvtepu8_epi16(mm);
  return hsum_i32(_mm256_madd_epi16(m16, load256(bsums)));
}

// One Q4_K/Q5_K super-block's contribution, from its exact integer sums.
inline float k_superblock(float acc, int isum, int msum, uint16_t d, uint16_t dmin, float dx) {
  acc = std::fma(static_cast<float>(isum), f16_to_f32(d) * dx, acc);
  return std::fma(static_cast<float>(-msum), f16_to_f32(dmin) * dx, acc);
}

float dot_q4_k(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  float acc = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    uint8_t sc[8], m[8];
    scales_mins(bw[i].scales, sc, m);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(bw[i].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      const __m256i dlo = dot_u8s8(_mm256_setzero_si256(), lo, load256(bx[i].qs + 64 * c));
      const __m256i dhi = dot_u8s8(_mm256_setzero_si256(), hi, load256(bx[i].qs + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dlo, _mm256_set1_epi32(sc[2 * c])));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dhi, _mm256_set1_epi32(sc[2 * c + 1])));
    }
    acc = k_superblock(acc, hsum_i32(isum), min_term(m, bx[i].bsums), bw[i].d, bw[i].dmin, bx[i].d);
  }
  return acc;
}

float dot_q5_k(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bit0 = _mm256_set1_epi8(0x01);
  float acc = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    uint8_t sc[8], m[8];
    scales_mins(bw[i].scales, sc, m);
    __m256i qh = load256(bw[i].qh);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(bw[i].qs + 32 * c);
      // Fifth bits: bit 2c of qh for the low half, bit 2c+1 for the high half; qh shifts
      // right by 2 per chunk (16-bit shifts are fine because we mask to bit 0/1 after).
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(qh, bit0), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), bit0), 4);
      qh = _mm256_srli_epi16(qh, 2);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), h_lo);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), h_hi);
      const __m256i dlo = dot_u8s8(_mm256_setzero_si256(), lo, load256(bx[i].qs + 64 * c));
      const __m256i dhi = dot_u8s8(_mm256_setzero_si256(), hi, load256(bx[i].qs + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dlo, _mm256_set1_epi32(sc[2 * c])));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dhi, _mm256_set1_epi32(sc[2 * c + 1])));
    }
    acc = k_superblock(acc, hsum_i32(isum), min_term(m, bx[i].bsums), bw[i].d, bw[i].dmin, bx[i].d);
  }
  return acc;
}

float dot_q6_k(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ6_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  float acc = 0.0f;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    const BlockQ6_K& b = bw[i];
    const int8_t* xq = bx[i].qs;
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(b.ql + 64 * h);
      const __m256i ql1 = load256(b.ql + 64 * h + 32);
      const __m256i qh = load256(b.qh + 32 * h);
      // The four 32-element groups of this half, quants 0..63 (offset 32 folded in below).
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4));
      for (int g = 0; g < 4; ++g) {
        const int e = 128 * h + 32 * g;  // first element of this group
        const __m256i dq = dot_u8s8(_mm256_setzero_si256(), q[g], load256(xq + e));
        // Lanes 0-3 cover elements e..e+15 (scale e/16), lanes 4-7 the next 16.
        const __m256i s =
            _mm256_setr_epi32(b.scales[e / 16], b.scales[e / 16], b.scales[e / 16], b.scales[e / 16],
                              b.scales[e / 16 + 1], b.scales[e / 16 + 1], b.scales[e / 16 + 1], b.scales[e / 16 + 1]);
        isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dq, s));
      }
    }
    // The -32 offset: sum_g scale[g] * 32 * bsum[g].
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(bx[i].bsums)), 5);
    isum = _mm256_sub_epi32(isum, off);
    acc = std::fma(static_cast<float>(hsum_i32(isum)), f16_to_f32(b.d) * bx[i].d, acc);
  }
  return acc;
}

}  // namespace

const VecDotFn kVecDotQ4_KSimd = dot_q4_k;
const VecDotFn kVecDotQ5_KSimd = dot_q5_k;
const VecDotFn kVecDotQ6_KSimd = dot_q6_k;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const VecDotFn kVecDotQ4_KSimd = nullptr;
const VecDotFn kVecDotQ5_KSimd = nullptr;
const VecDotFn kVecDotQ6_KSimd = nullptr;
}  // namespace corvid::ops::cpu

#endif
