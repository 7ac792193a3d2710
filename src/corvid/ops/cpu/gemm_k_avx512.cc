// Prompt GEMM of the K-quant formats (Q4_K, Q5_K, Q6_K) with AVX-512 VNNI:
// out[t * ldo + r] = dot(weight row r, activation row t) for a range of weight rows and all
// n tokens, bit-identical to the single-row kernels of quants_k_avx2.cc.
//
// Why a separate kernel: the single-row kernels unpack a weight row once per token and
// reduce every (row, token) dot horizontally. Here a panel of 16 weight rows is unpacked
// once per call into "VNNI layout": for each group of 4 consecutive elements, the 16 rows'
// 4 codes side by side in one 64-byte vector. One vpdpbusd with a token's 4 activations
// broadcast then does 16 rows x 4 elements, each 32-bit lane is one row, and no lane is
// ever reduced. The same vector serves 8 tokens (8 accumulators), so a weight load feeds 8
// dot instructions.
//
// Numerics (the contract shared with quants_k_avx2.cc): per super-block the integer sums
// are exact (I = sum of sc * q * x with Q6_K's -32 offset folded in, M = the Q4_K/Q5_K min
// term), then acc = fma(float(I), d_w * d_x, acc) and, with mins, acc = fma(float(-M),
// dmin_w * d_x, acc), in super-block order. A lane does exactly that scalar sequence, so a
// token's result does not depend on the panel, the token group or n (batch invariance).
#include "corvid/ops/cpu/quants.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
// GCC 12's AVX-512 intrinsics trip spurious -Wmaybe-uninitialized (see quants_avx512.cc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "corvid/core/half.h"

namespace corvid::ops::cpu {

namespace {

constexpr int kPanelRows = 16;  // one 32-bit lane per weight row
constexpr int kTokens = 8;      // accumulators per weight vector
constexpr int kGroups = kQKK / 4;

// Q8_K field offsets.
constexpr size_t kXd = offsetof(BlockQ8_K, d), kXqs = offsetof(BlockQ8_K, qs), kXbsums = offsetof(BlockQ8_K, bsums);

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// A panel of up to 16 weight rows, unpacked for every super-block of the row.
struct Panel {
  std::vector<uint32_t> codes;  // [sb][group][row]: 4 unsigned codes of elements 4g..4g+3
  std::vector<int32_t> scales;  // [sb][sub-block][row]
  std::vector<int32_t> pairs;   // [sb][pair][row]: two int16 factors of bsums[2p], bsums[2p+1]
  std::vector<float> d, dmin;   // [sb][row]
};

inline uint32_t int16_pair(int a, int b) {
  return static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int16_t>(a))) |
         (static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int16_t>(b))) << 16);
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store256(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// Format traits: sub-blocks per super-block, groups of 4 per sub-block, whether the min term
// applies, and `unpack`: one super-block's 256 codes in element order, its per-sub-block
// integer scales, its 8 bsums pair factors and its float scales.
struct KQ4 {
  static constexpr int kSub = 8, kSubGroups = 8;
  static constexpr bool kMin = true;
  using Block = BlockQ4_K;
  static void nibbles(const uint8_t* qs, uint8_t* codes) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(qs + 32 * c);
      store256(codes + 64 * c, _mm256_and_si256(q, low4));
      store256(codes + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
    }
  }
  static void scales_of(const uint8_t* s, int32_t* sc, uint32_t* pairs) {
    for (int j = 0; j < 8; ++j) {
      uint8_t a, m;
      unpack_scale_min_k4(s, j, &a, &m);
      sc[j] = a;
      pairs[j] = int16_pair(m, m);  // sub-block j covers bsums 2j and 2j+1
    }
  }
  static void unpack(const Block& b, uint8_t* codes, int32_t* sc, uint32_t* pairs, float* d, float* dmin) {
    nibbles(b.qs, codes);
    scales_of(b.scales, sc, pairs);
    *d = f16_to_f32(b.d);
    *dmin = f16_to_f32(b.dmin);
  }
};

struct KQ5 : KQ4 {
  using Block = BlockQ5_K;
  static void unpack(const Block& b, uint8_t* codes, int32_t* sc, uint32_t* pairs, float* d, float* dmin) {
    nibbles(b.qs, codes);
    const __m256i bit0 = _mm256_set1_epi8(0x01);
    __m256i qh = load256(b.qh);
    for (int c = 0; c < 4; ++c) {  // fifth bits: bit 2c of qh[l] for 64c+l, bit 2c+1 for 64c+32+l
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(qh, bit0), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), bit0), 4);
      qh = _mm256_srli_epi16(qh, 2);
      store256(codes + 64 * c, _mm256_or_si256(load256(codes + 64 * c), h_lo));
      store256(codes + 64 * c + 32, _mm256_or_si256(load256(codes + 64 * c + 32), h_hi));
    }
    scales_of(b.scales, sc, pairs);
    *d = f16_to_f32(b.d);
    *dmin = f16_to_f32(b.dmin);
  }
};

struct KQ6 {
  static constexpr int kSub = 16, kSubGroups = 4;
  static constexpr bool kMin = false;
  using Block = BlockQ6_K;
  static void unpack(const Block& b, uint8_t* codes, int32_t* sc, uint32_t* pairs, float* d, float* /*dmin*/) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i two = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(b.ql + 64 * h);
      const __m256i ql1 = load256(b.ql + 64 * h + 32);
      const __m256i qh = load256(b.qh + 32 * h);
      uint8_t* c = codes + 128 * h;
      store256(c, _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, two), 4)));
      store256(c + 32, _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4)));
      store256(c + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4)));
      store256(c + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4)));
    }
    for (int g = 0; g < 16; ++g) sc[g] = b.scales[g];
    for (int p = 0; p < 8; ++p) pairs[p] = int16_pair(b.scales[2 * p], b.scales[2 * p + 1]);  // the -32 offset
    *d = f16_to_f32(b.d);
  }
};

template <class F>
void unpack_panel(const uint8_t* w, size_t w_stride, int rows, int nsb, Panel& p) {
  p.codes.resize(static_cast<size_t>(nsb) * kGroups * kPanelRows);
  p.scales.resize(static_cast<size_t>(nsb) * F::kSub * kPanelRows);
  p.pairs.resize(static_cast<size_t>(nsb) * 8 * kPanelRows);
  p.d.resize(static_cast<size_t>(nsb) * kPanelRows);
  p.dmin.resize(static_cast<size_t>(nsb) * kPanelRows);
  if (rows < kPanelRows) {  // only a last, partial panel has lanes that no row writes
    std::fill(p.codes.begin(), p.codes.end(), 0u);
    std::fill(p.scales.begin(), p.scales.end(), 0);
    std::fill(p.pairs.begin(), p.pairs.end(), 0);
    std::fill(p.d.begin(), p.d.end(), 0.0f);
    std::fill(p.dmin.begin(), p.dmin.end(), 0.0f);
  }
  alignas(64) uint8_t codes[kQKK];
  int32_t sc[16];
  uint32_t pairs[8];
  for (int r = 0; r < rows; ++r) {
    const auto* blocks = reinterpret_cast<const typename F::Block*>(w + static_cast<size_t>(r) * w_stride);
    for (int sb = 0; sb < nsb; ++sb) {
      float d = 0, dmin = 0;
      F::unpack(blocks[sb], codes, sc, pairs, &d, &dmin);
      uint32_t* dst = p.codes.data() + static_cast<size_t>(sb) * kGroups * kPanelRows + r;
      for (int g = 0; g < kGroups; ++g) std::memcpy(dst + g * kPanelRows, codes + 4 * g, 4);
      for (int s = 0; s < F::kSub; ++s) p.scales[(static_cast<size_t>(sb) * F::kSub + s) * kPanelRows + r] = sc[s];
      for (int q = 0; q < 8; ++q) {
        p.pairs[(static_cast<size_t>(sb) * 8 + q) * kPanelRows + r] = static_cast<int32_t>(pairs[q]);
      }
      p.d[static_cast<size_t>(sb) * kPanelRows + r] = d;
      p.dmin[static_cast<size_t>(sb) * kPanelRows + r] = dmin;
    }
  }
}

// J tokens (rows x + t * x_stride of Q8_K blocks) against one unpacked panel.
template <class F, int J>
void panel_tokens(const Panel& p, int nsb, const uint8_t* x, size_t x_stride, float* out, int64_t ldo,
                  __mmask16 mask) {
  __m512 facc[J];
#pragma GCC unroll 8
  for (int t = 0; t < J; ++t) facc[t] = _mm512_setzero_ps();
  for (int sb = 0; sb < nsb; ++sb) {
    const size_t xb = static_cast<size_t>(sb) * sizeof(BlockQ8_K);
    const uint32_t* codes = p.codes.data() + static_cast<size_t>(sb) * kGroups * kPanelRows;
    const int32_t* scales = p.scales.data() + static_cast<size_t>(sb) * F::kSub * kPanelRows;
    __m512i isum[J];
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) isum[t] = _mm512_setzero_si512();
    for (int s = 0; s < F::kSub; ++s) {
      __m512i acc[J];
#pragma GCC unroll 8
      for (int t = 0; t < J; ++t) acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int g = s * F::kSubGroups; g < (s + 1) * F::kSubGroups; ++g) {
        const __m512i wv = _mm512_loadu_si512(codes + g * kPanelRows);
        const uint8_t* xq = x + xb + kXqs + 4 * g;
#pragma GCC unroll 8
        for (int t = 0; t < J; ++t) {
          acc[t] = _mm512_dpbusd_epi32(acc[t], wv, _mm512_set1_epi32(load_i32(xq + t * x_stride)));
        }
      }
      const __m512i sc = _mm512_loadu_si512(scales + s * kPanelRows);
#pragma GCC unroll 8
      for (int t = 0; t < J; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], sc));
    }
    // The bsums term: Q4_K/Q5_K's mins (M), Q6_K's -32 offset (sum of sc * bsums).
    __m512i bterm[J];
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) bterm[t] = _mm512_setzero_si512();
    const int32_t* pairs = p.pairs.data() + static_cast<size_t>(sb) * 8 * kPanelRows;
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i pw = _mm512_loadu_si512(pairs + q * kPanelRows);
#pragma GCC unroll 8
      for (int t = 0; t < J; ++t) {
        bterm[t] = _mm512_dpwssd_epi32(bterm[t], pw, _mm512_set1_epi32(load_i32(x + t * x_stride + xb + kXbsums + 4 * q)));
      }
    }
    const __m512 dw = _mm512_loadu_ps(p.d.data() + static_cast<size_t>(sb) * kPanelRows);
    const __m512 dmin = _mm512_loadu_ps(p.dmin.data() + static_cast<size_t>(sb) * kPanelRows);
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) {
      const __m512 dx = _mm512_set1_ps(load_f32(x + t * x_stride + xb + kXd));
      if constexpr (F::kMin) {
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, dx), facc[t]);
        const __m512i neg_m = _mm512_sub_epi32(_mm512_setzero_si512(), bterm[t]);
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(neg_m), _mm512_mul_ps(dmin, dx), facc[t]);
      } else {
        const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(bterm[t], 5));
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(dw, dx), facc[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < J; ++t) _mm512_mask_storeu_ps(out + t * ldo, mask, facc[t]);
}

template <class F>
void gemm(const void* w, size_t w_stride, int64_t rows, const void* x, size_t x_stride, int64_t n, float* out,
          int64_t ldo, int64_t k) {
  const int nsb = static_cast<int>(k / kQKK);
  thread_local Panel panel;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kPanelRows, rows - r0));
    unpack_panel<F>(wb + static_cast<size_t>(r0) * w_stride, w_stride, nr, nsb, panel);
    const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1);
    int64_t t = 0;
    for (; t + kTokens <= n; t += kTokens) {
      panel_tokens<F, kTokens>(panel, nsb, xb + static_cast<size_t>(t) * x_stride, x_stride, out + t * ldo + r0, ldo,
                               mask);
    }
    const uint8_t* xt = xb + static_cast<size_t>(t) * x_stride;
    float* ot = out + t * ldo + r0;
    switch (n - t) {
      case 1: panel_tokens<F, 1>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 2: panel_tokens<F, 2>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 3: panel_tokens<F, 3>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 4: panel_tokens<F, 4>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 5: panel_tokens<F, 5>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 6: panel_tokens<F, 6>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      case 7: panel_tokens<F, 7>(panel, nsb, xt, x_stride, ot, ldo, mask); break;
      default: break;
    }
  }
}

}  // namespace

const GemmFn kGemmQ4_KAvx512 = gemm<KQ4>;
const GemmFn kGemmQ5_KAvx512 = gemm<KQ5>;
const GemmFn kGemmQ6_KAvx512 = gemm<KQ6>;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const GemmFn kGemmQ4_KAvx512 = nullptr;
const GemmFn kGemmQ5_KAvx512 = nullptr;
const GemmFn kGemmQ6_KAvx512 = nullptr;
}  // namespace corvid::ops::cpu

#endif
