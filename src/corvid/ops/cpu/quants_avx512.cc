// AVX-512 VNNI dot products of the 32-element block formats (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0) against their ggml activation formats (Q8_0 / Q8_1).
//
// Performance notes (decode is a stream over the weight; these kernels must
// run faster than memory so n = 1 stays bandwidth bound):
// - Two blocks per 512-bit register: one vpdpbusd computes both blocks' 32-term
//   integer dots (8 int32 lanes each).
// - Scales are handled 8 blocks at a time instead of per block: one gather pulls
//   the 8 weight (d, m) f16 pairs, one the 8 activation (d, s) pairs, one
//   vcvtph2ps each, one multiply gives [d*dx, m*s] for 8 blocks. A lane permute
//   then spreads each block's d*dx over its 8 dot lanes. The per-block scalar
//   f16 conversions of the AVX2 kernel (the bulk of its instructions) disappear.
// - The min terms m*s (Q4_1/Q5_1) accumulate in the odd lanes of one vector and
//   are reduced once at the end.
// - Fixed accumulation order (two accumulators, fixed reduction), so results
//   depend only on the inputs.
#include "corvid/ops/cpu/quants.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
// GCC 12's AVX-512 intrinsics build "undefined" vectors by self-initialisation, which
// -Wmaybe-uninitialized reports once they are inlined here; the warning is spurious.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstring>

namespace corvid::ops::cpu {

namespace {

// Offsets of the first f16 scale in each block (the gather reads 32 bits from there).
template <int kStride>
inline __m256i block_offsets() {
  return _mm256_setr_epi32(0, kStride, 2 * kStride, 3 * kStride, 4 * kStride, 5 * kStride, 6 * kStride, 7 * kStride);
}

// 32 bits at `base + offsets[i]` for the first `count` (1..8) blocks, zero for the rest.
template <int kStride>
inline __m512 gather_scale_pairs(const uint8_t* base, int count) {
  const __m256i idx = block_offsets<kStride>();
  __m256i v;
  if (count == 8) {
    v = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), idx, 1);
  } else {
    const __mmask8 m = static_cast<__mmask8>((1u << count) - 1);
    v = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), m, idx, base, 1);
  }
  return _mm512_cvtph_ps(v);  // [first f16, second f16] per block
}

// Lanes 0-7 = p[2j], lanes 8-15 = p[2j + 2]: the d*dx products of blocks j and j+1.
inline __m512 spread_pair(__m512 p, int j) {
  const __m512i idx = _mm512_add_epi32(
      _mm512_set1_epi32(2 * j), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2));
  return _mm512_permutexvar_ps(idx, p);
}

inline __m512i load_pair256(const uint8_t* a, const uint8_t* b_or_null) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = b_or_null ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b_or_null)) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 16 packed bytes of two blocks -> 64 nibbles [a low, a high, b low, b high] (ggml element order).
inline __m512i unpack_nibbles_pair(const uint8_t* a, const uint8_t* b_or_null) {
  const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i qb = b_or_null ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b_or_null)) : _mm_setzero_si128();
  const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), qb, 1);  // [a | b]
  __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);  // [a, b, a>>4, b>>4]
  v = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));                                  // [a, a>>4, b, b>>4]
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Fifth bits of two Q5 blocks as 0x10 bytes in the same element order as unpack_nibbles_pair.
inline __m512i high_bits_pair(const uint8_t* qh_a, const uint8_t* qh_b_or_null) {
  const uint64_t bits = load_u32(qh_a) | (static_cast<uint64_t>(qh_b_or_null ? load_u32(qh_b_or_null) : 0) << 32);
  return _mm512_maskz_mov_epi8(_cvtu64_mask64(bits), _mm512_set1_epi8(0x10));
}

// Signed x signed via the unsigned instruction: |a| times b with a's sign.
inline __m512i dot_s8s8(__m512i a, __m512i b) {
  const __mmask64 neg = _mm512_movepi8_mask(a);
  const __m512i b_signed = _mm512_mask_sub_epi8(b, neg, _mm512_setzero_si512(), b);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(a), b_signed);
}

// The shared loop. Block i of the weight starts at w + i*kW, of the activation at x + i*kX.
// pair_dot(i, has_second) returns the int32 dot lanes of blocks i and i+1;
// kMinTerm: add sum of (second f16 of w) * (second f16 of x) over blocks (Q4_1/Q5_1).
template <int kW, int kX, bool kMinTerm, class PairDot>
inline float dot_blocks(const uint8_t* w, const uint8_t* x, int64_t nb, PairDot pair_dot) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc_min = _mm512_setzero_ps();
  int64_t i0 = 0;
  // Full groups of 8 blocks: straight-line code, no per-pair branches.
  for (; i0 + 8 <= nb; i0 += 8) {
    const __m512 p = _mm512_mul_ps(gather_scale_pairs<kW>(w + i0 * kW, 8), gather_scale_pairs<kX>(x + i0 * kX, 8));
    if constexpr (kMinTerm) acc_min = _mm512_add_ps(acc_min, p);
    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(i0, true)), spread_pair(p, 0), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(i0 + 2, true)), spread_pair(p, 2), acc1);
    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(i0 + 4, true)), spread_pair(p, 4), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(i0 + 6, true)), spread_pair(p, 6), acc1);
  }
  if (i0 < nb) {  // the last 1..7 blocks: masked gathers, a half pair when the count is odd
    const int count = static_cast<int>(nb - i0);
    const __m512 p = _mm512_mul_ps(gather_scale_pairs<kW>(w + i0 * kW, count),
                                   gather_scale_pairs<kX>(x + i0 * kX, count));
    if constexpr (kMinTerm) acc_min = _mm512_add_ps(acc_min, p);
    for (int j = 0; j < count; j += 2) {
      const __m512 d = _mm512_cvtepi32_ps(pair_dot(i0 + j, j + 1 < count));
      if (j & 2) {
        acc1 = _mm512_fmadd_ps(d, spread_pair(p, j), acc1);
      } else {
        acc0 = _mm512_fmadd_ps(d, spread_pair(p, j), acc0);
      }
    }
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  if constexpr (kMinTerm) sum += _mm512_mask_reduce_add_ps(0xAAAA, acc_min);
  return sum;
}

float dot_q4_0(const void* wv, const void* xv, int64_t k) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  constexpr int kW = sizeof(BlockQ4_0), kX = sizeof(BlockQ8_0);
  const __m512i eight = _mm512_set1_epi8(8);
  return dot_blocks<kW, kX, false>(w, x, k / kQK, [&](int64_t i, bool two) {
    const uint8_t* b = two ? w + (i + 1) * kW + 2 : nullptr;
    const __m512i q = unpack_nibbles_pair(w + i * kW + 2, b);
    const __m512i xx = load_pair256(x + i * kX + 2, two ? x + (i + 1) * kX + 2 : nullptr);
    // (q - 8) . x = q . x - 8 * sum(x): both unsigned-by-signed dots.
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, xx));
  });
}

float dot_q4_1(const void* wv, const void* xv, int64_t k) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  constexpr int kW = sizeof(BlockQ4_1), kX = sizeof(BlockQ8_1);
  return dot_blocks<kW, kX, true>(w, x, k / kQK, [&](int64_t i, bool two) {
    const __m512i q = unpack_nibbles_pair(w + i * kW + 4, two ? w + (i + 1) * kW + 4 : nullptr);
    const __m512i xx = load_pair256(x + i * kX + 4, two ? x + (i + 1) * kX + 4 : nullptr);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx);
  });
}

float dot_q5_0(const void* wv, const void* xv, int64_t k) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  constexpr int kW = sizeof(BlockQ5_0), kX = sizeof(BlockQ8_0);
  const __m512i sixteen = _mm512_set1_epi8(16);
  return dot_blocks<kW, kX, false>(w, x, k / kQK, [&](int64_t i, bool two) {
    const uint8_t* a = w + i * kW;
    const uint8_t* b = two ? a + kW : nullptr;
    const __m512i q = _mm512_or_si512(unpack_nibbles_pair(a + 6, b ? b + 6 : nullptr),
                                      high_bits_pair(a + 2, b ? b + 2 : nullptr));
    const __m512i xx = load_pair256(x + i * kX + 2, two ? x + (i + 1) * kX + 2 : nullptr);
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), sixteen, xx));
  });
}

float dot_q5_1(const void* wv, const void* xv, int64_t k) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  constexpr int kW = sizeof(BlockQ5_1), kX = sizeof(BlockQ8_1);
  return dot_blocks<kW, kX, true>(w, x, k / kQK, [&](int64_t i, bool two) {
    const uint8_t* a = w + i * kW;
    const uint8_t* b = two ? a + kW : nullptr;
    const __m512i q = _mm512_or_si512(unpack_nibbles_pair(a + 8, b ? b + 8 : nullptr),
                                      high_bits_pair(a + 4, b ? b + 4 : nullptr));
    const __m512i xx = load_pair256(x + i * kX + 4, two ? x + (i + 1) * kX + 4 : nullptr);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx);
  });
}

float dot_q8_0(const void* wv, const void* xv, int64_t k) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  constexpr int kW = sizeof(BlockQ8_0), kX = sizeof(BlockQ8_0);
  // The gathered 32 bits are (d, first two quants); only the d lanes of the product are used.
  return dot_blocks<kW, kX, false>(w, x, k / kQK, [&](int64_t i, bool two) {
    const __m512i q = load_pair256(w + i * kW + 2, two ? w + (i + 1) * kW + 2 : nullptr);
    const __m512i xx = load_pair256(x + i * kX + 2, two ? x + (i + 1) * kX + 2 : nullptr);
    return dot_s8s8(q, xx);
  });
}

}  // namespace

const VecDotFn kVecDotQ4_0Avx512 = dot_q4_0;
const VecDotFn kVecDotQ4_1Avx512 = dot_q4_1;
const VecDotFn kVecDotQ5_0Avx512 = dot_q5_0;
const VecDotFn kVecDotQ5_1Avx512 = dot_q5_1;
const VecDotFn kVecDotQ8_0Avx512 = dot_q8_0;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const VecDotFn kVecDotQ4_0Avx512 = nullptr;
const VecDotFn kVecDotQ4_1Avx512 = nullptr;
const VecDotFn kVecDotQ5_0Avx512 = nullptr;
const VecDotFn kVecDotQ5_1Avx512 = nullptr;
const VecDotFn kVecDotQ8_0Avx512 = nullptr;
}  // namespace corvid::ops::cpu

#endif
