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

// The 8 weight (d, m) pairs of 8 full Q4_1 blocks (20 bytes each: the pairs are dwords
// 0, 5, ..., 35 of the group) with two permutes of plain loads instead of a gather; the
// default model's weights are Q4_1, and the gather was ~10% of its dot product. Only bytes
// inside the 8 blocks are read. Same floats as gather_scale_pairs, so the same bits.
inline __m512 q4_1_scale_pairs8(const uint8_t* base) {
  const __m512i a = _mm512_loadu_si512(base);       // dwords 0..15
  const __m512i b = _mm512_loadu_si512(base + 64);  // dwords 16..31
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + 128));  // dwords 32..35
  const __m512i idx = _mm512_setr_epi32(0, 5, 10, 15, 20, 25, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i first7 = _mm512_castsi512_si256(_mm512_permutex2var_epi32(a, idx, b));
  const __m256i last = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(c), _mm256_set1_epi32(3));
  return _mm512_cvtph_ps(_mm256_blend_epi32(first7, last, 0x80));
}

// Lanes 0-7 = p[2j], lanes 8-15 = p[2j + 2]: the d*dx products of blocks j and j+1.
inline __m512 spread_pair(__m512 p, int j) {
  const __m512i idx =
      _mm512_add_epi32(_mm512_set1_epi32(2 * j), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2));
  return _mm512_permutexvar_ps(idx, p);
}

inline __m512i load_pair256(const uint8_t* a, const uint8_t* b_or_null) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi =
      b_or_null ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b_or_null)) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 16 packed bytes of two blocks -> 64 nibbles [a low, a high, b low, b high] (ggml element order).
inline __m512i unpack_nibbles_pair(const uint8_t* a, const uint8_t* b_or_null) {
  // [a, a, b, b] by (masked) 128-bit broadcasts, then a per-lane variable shift (0 or 4 bits)
  // and a mask: no cross-lane shuffles, which compete for port 5 with the scale permutes.
  const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i qb = b_or_null ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b_or_null)) : _mm_setzero_si128();
  const __m512i v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(qa), 0xFF00, qb);
  const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                           0x0004000400040004LL, 0x0004000400040004LL);
  return _mm512_and_si512(_mm512_srlv_epi16(v, shifts), _mm512_set1_epi8(0x0F));
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

// Format traits. Each gives the block sizes, where the weight's first f16 scale and
// quants sit, whether the min term applies, `unpack` (the weight operand of a pair of
// blocks, computed once and shared by every token) and `dot` (the int32 lanes of that
// pair against one token's activation pair).
struct FmtQ4_0 {
  static constexpr int kW = sizeof(BlockQ4_0), kX = sizeof(BlockQ8_0), kXq = 2;
  static constexpr bool kMinTerm = false;
  using Pair = __m512i;
  static Pair unpack(const uint8_t* a, const uint8_t* b) { return unpack_nibbles_pair(a + 2, b ? b + 2 : nullptr); }
  static __m512i dot(const Pair& q, __m512i xx) {
    // (q - 8) . x = q . x - 8 * sum(x): both unsigned-by-signed dots.
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xx));
  }
};

struct FmtQ4_1 {
  static constexpr int kW = sizeof(BlockQ4_1), kX = sizeof(BlockQ8_1), kXq = 4;
  static constexpr bool kMinTerm = true;
  using Pair = __m512i;
  static Pair unpack(const uint8_t* a, const uint8_t* b) { return unpack_nibbles_pair(a + 4, b ? b + 4 : nullptr); }
  static __m512i dot(const Pair& q, __m512i xx) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx); }
};

struct FmtQ5_0 {
  static constexpr int kW = sizeof(BlockQ5_0), kX = sizeof(BlockQ8_0), kXq = 2;
  static constexpr bool kMinTerm = false;
  using Pair = __m512i;
  static Pair unpack(const uint8_t* a, const uint8_t* b) {
    return _mm512_or_si512(unpack_nibbles_pair(a + 6, b ? b + 6 : nullptr), high_bits_pair(a + 2, b ? b + 2 : nullptr));
  }
  static __m512i dot(const Pair& q, __m512i xx) {
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), xx));
  }
};

struct FmtQ5_1 {
  static constexpr int kW = sizeof(BlockQ5_1), kX = sizeof(BlockQ8_1), kXq = 4;
  static constexpr bool kMinTerm = true;
  using Pair = __m512i;
  static Pair unpack(const uint8_t* a, const uint8_t* b) {
    return _mm512_or_si512(unpack_nibbles_pair(a + 8, b ? b + 8 : nullptr), high_bits_pair(a + 4, b ? b + 4 : nullptr));
  }
  static __m512i dot(const Pair& q, __m512i xx) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xx); }
};

// Q8_0 weights are signed: |w| is the unsigned operand and each token's x takes w's sign.
// The gathered 32 bits are (d, first two quants); only the d lanes of the product are used.
struct FmtQ8_0 {
  static constexpr int kW = sizeof(BlockQ8_0), kX = sizeof(BlockQ8_0), kXq = 2;
  static constexpr bool kMinTerm = false;
  struct Pair {
    __m512i abs;
    __mmask64 neg;
  };
  static Pair unpack(const uint8_t* a, const uint8_t* b) {
    const __m512i q = load_pair256(a + 2, b ? b + 2 : nullptr);
    return {_mm512_abs_epi8(q), _mm512_movepi8_mask(q)};
  }
  static __m512i dot(const Pair& q, __m512i xx) {
    const __m512i x_signed = _mm512_mask_sub_epi8(xx, q.neg, _mm512_setzero_si512(), xx);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q.abs, x_signed);
  }
};

constexpr int kPrefetchBytes = 2048;

// out[t] = dot(weight row w, activation row xs[t]) for t < T. The weight work (unpacking,
// scale gathers, prefetch) is shared by the T tokens; each token's float arithmetic is the
// same sequence whatever T is, so the T = 1 instance (vec_dot) and the multi-token
// instances (matmul with n > 1) give identical bits.
// kPrepared: xs are prepared rows (float scale pairs after the blocks, see quants.h); else
// plain rows whose f16 scale fields are gathered. Both give the same floats, so the same bits.
template <class F, int T, bool kPrepared>
void dot_rows(const uint8_t* w, const uint8_t* const* xs, int64_t nb, float* out) {
  constexpr int kW = F::kW, kX = F::kX;
  __m512 acc0[T], acc1[T], acc_min[T], p[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = acc_min[t] = _mm512_setzero_ps();
  // Prepared-row layout (quants.h): scales at a 64-byte-rounded offset after the blocks, then quants.
  const int64_t scales_off = (nb * kX + 63) / 64 * 64;
  const int64_t quants_off = (scales_off + nb * 8 + 63) / 64 * 64;
  auto pair = [&](int64_t i, bool two, int j) {
    const typename F::Pair q = F::unpack(w + i * kW, two ? w + (i + 1) * kW : nullptr);
    for (int t = 0; t < T; ++t) {
      __m512i xx;
      if constexpr (kPrepared) {  // contiguous quants: one load (masked for a lone last block)
        const uint8_t* x = xs[t] + quants_off + i * kQK;
        xx = two ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, x);
      } else {
        const uint8_t* x = xs[t] + i * kX + F::kXq;
        xx = load_pair256(x, two ? x + kX : nullptr);
      }
      const __m512 d = _mm512_cvtepi32_ps(F::dot(q, xx));
      if (j & 2) {
        acc1[t] = _mm512_fmadd_ps(d, spread_pair(p[t], j), acc1[t]);
      } else {
        acc0[t] = _mm512_fmadd_ps(d, spread_pair(p[t], j), acc0[t]);
      }
    }
  };
  auto scales = [&](int64_t i0, int count) {
    __m512 ws;
    if constexpr (kW == sizeof(BlockQ4_1)) {
      ws = count == 8 ? q4_1_scale_pairs8(w + i0 * kW) : gather_scale_pairs<kW>(w + i0 * kW, count);
    } else {
      ws = gather_scale_pairs<kW>(w + i0 * kW, count);
    }
    for (int t = 0; t < T; ++t) {
      __m512 xsc;
      if constexpr (kPrepared) {
        const float* sc = reinterpret_cast<const float*>(xs[t] + scales_off) + 2 * i0;
        xsc = count == 8 ? _mm512_loadu_ps(sc) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (2 * count)) - 1), sc);
      } else {
        xsc = gather_scale_pairs<kX>(xs[t] + i0 * kX, count);
      }
      p[t] = _mm512_mul_ps(ws, xsc);
      if constexpr (F::kMinTerm) acc_min[t] = _mm512_add_ps(acc_min[t], p[t]);
    }
  };
  int64_t i0 = 0;
  for (; i0 + 8 <= nb; i0 += 8) {  // full groups of 8 blocks: straight-line code
    // Software prefetch kPrefetchBytes ahead in the weight stream (it runs on into the next
    // rows, which follow in memory) to keep more DRAM requests in flight at n = 1.
    for (int l = 0; l < 8 * kW; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(w + i0 * kW + kPrefetchBytes + l), _MM_HINT_T0);
    }
    scales(i0, 8);
    pair(i0, true, 0);
    pair(i0 + 2, true, 2);
    pair(i0 + 4, true, 4);
    pair(i0 + 6, true, 6);
  }
  if (i0 < nb) {  // the last 1..7 blocks: masked gathers, a half pair when the count is odd
    const int count = static_cast<int>(nb - i0);
    scales(i0, count);
    for (int j = 0; j < count; j += 2) pair(i0 + j, j + 1 < count, j);
  }
  for (int t = 0; t < T; ++t) {
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
    if constexpr (F::kMinTerm) sum += _mm512_mask_reduce_add_ps(0xAAAA, acc_min[t]);
    out[t] = sum;
  }
}

template <class F>
float vec_dot(const void* w, const void* x, int64_t k) {
  const uint8_t* xs[1] = {static_cast<const uint8_t*>(x)};
  float out;
  dot_rows<F, 1, false>(static_cast<const uint8_t*>(w), xs, k / kQK, &out);
  return out;
}

template <class F>
void vec_dot_multi(const void* w, const void* const* xs, int n, float* out, int64_t k) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* const* xb = reinterpret_cast<const uint8_t* const*>(xs);
  switch (n) {
    case 1:
      dot_rows<F, 1, true>(wb, xb, k / kQK, out);
      break;
    case 2:
      dot_rows<F, 2, true>(wb, xb, k / kQK, out);
      break;
    case 3:
      dot_rows<F, 3, true>(wb, xb, k / kQK, out);
      break;
    default:
      dot_rows<F, 4, true>(wb, xb, k / kQK, out);
      break;
  }
}

}  // namespace

const VecDotFn kVecDotQ4_0Avx512 = vec_dot<FmtQ4_0>;
const VecDotFn kVecDotQ4_1Avx512 = vec_dot<FmtQ4_1>;
const VecDotFn kVecDotQ5_0Avx512 = vec_dot<FmtQ5_0>;
const VecDotFn kVecDotQ5_1Avx512 = vec_dot<FmtQ5_1>;
const VecDotFn kVecDotQ8_0Avx512 = vec_dot<FmtQ8_0>;
const VecDotMultiFn kVecDotMultiQ4_0Avx512 = vec_dot_multi<FmtQ4_0>;
const VecDotMultiFn kVecDotMultiQ4_1Avx512 = vec_dot_multi<FmtQ4_1>;
const VecDotMultiFn kVecDotMultiQ5_0Avx512 = vec_dot_multi<FmtQ5_0>;
const VecDotMultiFn kVecDotMultiQ5_1Avx512 = vec_dot_multi<FmtQ5_1>;
const VecDotMultiFn kVecDotMultiQ8_0Avx512 = vec_dot_multi<FmtQ8_0>;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const VecDotFn kVecDotQ4_0Avx512 = nullptr;
const VecDotFn kVecDotQ4_1Avx512 = nullptr;
const VecDotFn kVecDotQ5_0Avx512 = nullptr;
const VecDotFn kVecDotQ5_1Avx512 = nullptr;
const VecDotFn kVecDotQ8_0Avx512 = nullptr;
const VecDotMultiFn kVecDotMultiQ4_0Avx512 = nullptr;
const VecDotMultiFn kVecDotMultiQ4_1Avx512 = nullptr;
const VecDotMultiFn kVecDotMultiQ5_0Avx512 = nullptr;
const VecDotMultiFn kVecDotMultiQ5_1Avx512 = nullptr;
const VecDotMultiFn kVecDotMultiQ8_0Avx512 = nullptr;
}  // namespace corvid::ops::cpu

#endif
