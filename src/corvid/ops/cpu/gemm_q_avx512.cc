// Matmul of the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with AVX-512 VNNI,
// for any number of tokens: out[t * ldo + r] = dot(weight row r, activation row t).
//
// Layout, as in gemm_k_avx512.cc: 16 weight rows are unpacked to unsigned codes in lanes, so
// that one vector holds, for a group of 4 consecutive elements, the 16 rows' 4 codes. One
// vpdpbusd with a token's 4 activations broadcast does 16 rows x 4 elements; every 32-bit
// lane is one row, so no lane is ever reduced and the integer sums are exact.
// - The packed bytes of a block are transposed first (16 rows x 4 dwords per 16 bytes), then
//   unpacked: a quarter of the shuffles that transposing the codes would take.
// - Phase 1 of a panel reads its rows in memory order (the block scales and Q5 high bits),
//   which brings the panel into L1; the next panel is prefetched into L2 while this one
//   computes. (Reading 16 rows side by side without this ran decode at half bandwidth.)
// - Decode and short batches (n <= kFusedMaxTokens) use each unpacked block at once;
//   prompts unpack the whole panel into a buffer reused by groups of 8 tokens.
//
// Numerics, for every (row, token) in block order: S = the exact integer dot of the block's
// codes with the token's quants, minus the code offset times the sum of the quants (8 for
// Q4_0, 16 for Q5_0, 128 for Q8_0, whose signed quants are stored as q + 128), then
// acc = fma(float(S), d_w * d_x, acc) and, for Q4_1/Q5_1, acc = fma(m_w, s_x, acc).
// Each lane runs that sequence whatever the path, the panel or n, so decode and prefill
// give the same bits (batch invariance). vec_dot is the one-row, one-token case.
#include "corvid/ops/cpu/quants.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "corvid/core/half.h"

namespace corvid::ops::cpu {

namespace {

constexpr int kRows = 16;           // one 32-bit lane per weight row
constexpr int kTokens = 8;          // tokens sharing a loaded weight vector (buffered path)
constexpr int kFusedMaxTokens = 3;  // up to this many tokens, unpack in registers
constexpr int kBlockGroups = kQK / 4;

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Per token and block: the float scales and the integer offset term of the activation.
struct ActBlock {
  float dx, sx;
  int32_t neg_offset_sum;  // -offset * sum of the block's quants
  int32_t pad;
};

template <class F>
void prepare_acts(const uint8_t* x, size_t x_stride, int64_t n, int64_t nb, std::vector<ActBlock>& acts) {
  acts.resize(static_cast<size_t>(n * nb));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = x + static_cast<size_t>(t) * x_stride + static_cast<size_t>(b) * F::kX;
      ActBlock& a = acts[static_cast<size_t>(t * nb + b)];
      a.dx = f16_to_f32(load_u16(blk));
      a.sx = F::kMin ? f16_to_f32(load_u16(blk + 2)) : 0.0f;
      int sum = 0;
      if constexpr (F::kOffset != 0) {  // sum of 32 int8: bias to unsigned, sum of absolute differences with 0
        const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + F::kXq)),
                                           _mm256_set1_epi8(-128));
        const __m256i s4 = _mm256_sad_epu8(q, _mm256_setzero_si256());
        const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
        sum = static_cast<int>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 128 * kQK;
      }
      a.neg_offset_sum = -F::kOffset * sum;
      a.pad = 0;
    }
  }
}

// J tokens' accumulators over one panel of 16 rows.
template <class F, int J>
struct Lanes {
  __m512 acc[J];
  const uint8_t* x;
  size_t x_stride;
  const ActBlock* acts;
  int64_t nb;

  void zero() {
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) acc[t] = _mm512_setzero_ps();
  }

  // Block b, its 8 groups in g (registers or memory), its scales in dw / mw.
  inline void block(const __m512i* g, __m512 dw, __m512 mw, int64_t b) {
    // With few tokens, two dependency chains per token (even and odd groups): the sum is
    // an exact integer either way.
    constexpr int kChains = J <= 3 ? 2 : 1;
    __m512i s[kChains][J];
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) {
      s[0][t] = _mm512_set1_epi32(acts[t * nb + b].neg_offset_sum);
      if constexpr (kChains == 2) s[1][t] = _mm512_setzero_si512();
    }
    const size_t xo = static_cast<size_t>(b) * F::kX + F::kXq;
#pragma GCC unroll 8
    for (int i = 0; i < kBlockGroups; ++i) {
      const __m512i gv = _mm512_loadu_si512(g + i);
#pragma GCC unroll 8
      for (int t = 0; t < J; ++t) {
        __m512i& c = s[i % kChains][t];
        c = _mm512_dpbusd_epi32(c, gv, _mm512_set1_epi32(load_i32(x + t * x_stride + xo + 4 * i)));
      }
    }
    if constexpr (kChains == 2) {
#pragma GCC unroll 8
      for (int t = 0; t < J; ++t) s[0][t] = _mm512_add_epi32(s[0][t], s[1][t]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) {
      const ActBlock& a = acts[t * nb + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0][t]), _mm512_mul_ps(dw, _mm512_set1_ps(a.dx)), acc[t]);
      if constexpr (F::kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.sx), acc[t]);
    }
  }

  void store(float* out, int64_t ldo, __mmask16 mask) const {
#pragma GCC unroll 8
    for (int t = 0; t < J; ++t) _mm512_mask_storeu_ps(out + t * ldo, mask, acc[t]);
  }
};

// 16 bytes at `off` in each of 16 rows (`stride` apart) -> 4 vectors, t[j] lane r = row r's
// dword j: four rows per vector by 128-bit inserts, then a 4x4 dword transpose in every
// 128-bit lane. Transposing the packed bytes, before unpacking, moves a quarter of the data
// that transposing the codes would.
inline void rows16x16(const uint8_t* w, size_t stride, size_t off, __m512i* t) {
  __m512i y[4];
  const uint8_t* p = w + off;
  auto ld = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + static_cast<size_t>(r) * stride)); };
  for (int k = 0; k < 4; ++k) {
    __m512i v = _mm512_castsi128_si512(ld(k));
    v = _mm512_inserti32x4(v, ld(k + 4), 1);
    v = _mm512_inserti32x4(v, ld(k + 8), 2);
    y[k] = _mm512_inserti32x4(v, ld(k + 12), 3);
  }
  const __m512i a0 = _mm512_unpacklo_epi32(y[0], y[1]), a1 = _mm512_unpackhi_epi32(y[0], y[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(y[2], y[3]), a3 = _mm512_unpackhi_epi32(y[2], y[3]);
  t[0] = _mm512_unpacklo_epi64(a0, a2);
  t[1] = _mm512_unpackhi_epi64(a0, a2);
  t[2] = _mm512_unpacklo_epi64(a1, a3);
  t[3] = _mm512_unpackhi_epi64(a1, a3);
}

// 16 packed nibble bytes of each row -> the block's 8 groups: low nibbles of dword j are
// elements 4j..4j+3 (group j), high nibbles elements 16+4j.. (group 4+j).
inline void nibble_groups(const uint8_t* w, size_t stride, size_t off, __m512i* g) {
  __m512i t[4];
  rows16x16(w, stride, off, t);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int j = 0; j < 4; ++j) {
    g[j] = _mm512_and_si512(t[j], low4);
    g[4 + j] = _mm512_and_si512(_mm512_srli_epi16(t[j], 4), low4);
  }
}

// Q5 fifth bits: lane r of qh is row r's 32 bits (bit e = element e). Group gi needs bits
// 4gi..4gi+3 as 0x10 bytes: a 16-entry dword table indexed by those 4 bits.
inline void add_high_bits(__m512i qh, __m512i* g) {
  const __m512i table = _mm512_setr_epi32(0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                                          0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                                          0x10100000, 0x10100010, 0x10101000, 0x10101010);
  for (int gi = 0; gi < kBlockGroups; ++gi) {
    // permutexvar reads only the low 4 bits of each index lane.
    g[gi] = _mm512_or_si512(g[gi], _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * gi), table));
  }
}

// Format traits: weight block bytes, activation block bytes and quant offset, the code
// offset, whether a min term applies (m at byte 2), where the Q5 high bits sit (-1: none),
// and `groups`: block b of 16 rows as 8 vectors of unsigned codes, lane r = row r.
struct FQ4_0 {
  static constexpr int kW = sizeof(BlockQ4_0), kX = sizeof(BlockQ8_0), kXq = 2, kOffset = 8, kQh = -1;
  static constexpr bool kMin = false;
  static void groups(const uint8_t* w, size_t stride, int64_t b, const uint32_t*, __m512i* g) {
    nibble_groups(w, stride, static_cast<size_t>(b) * kW + 2, g);
  }
};
struct FQ4_1 {
  static constexpr int kW = sizeof(BlockQ4_1), kX = sizeof(BlockQ8_1), kXq = 4, kOffset = 0, kQh = -1;
  static constexpr bool kMin = true;
  static void groups(const uint8_t* w, size_t stride, int64_t b, const uint32_t*, __m512i* g) {
    nibble_groups(w, stride, static_cast<size_t>(b) * kW + 4, g);
  }
};
struct FQ5_0 {
  static constexpr int kW = sizeof(BlockQ5_0), kX = sizeof(BlockQ8_0), kXq = 2, kOffset = 16, kQh = 2;
  static constexpr bool kMin = false;
  static void groups(const uint8_t* w, size_t stride, int64_t b, const uint32_t* qh, __m512i* g) {
    nibble_groups(w, stride, static_cast<size_t>(b) * kW + 6, g);
    add_high_bits(_mm512_loadu_si512(qh), g);
  }
};
struct FQ5_1 {
  static constexpr int kW = sizeof(BlockQ5_1), kX = sizeof(BlockQ8_1), kXq = 4, kOffset = 0, kQh = 4;
  static constexpr bool kMin = true;
  static void groups(const uint8_t* w, size_t stride, int64_t b, const uint32_t* qh, __m512i* g) {
    nibble_groups(w, stride, static_cast<size_t>(b) * kW + 8, g);
    add_high_bits(_mm512_loadu_si512(qh), g);
  }
};
// Q8_0's signed quants become unsigned codes q + 128.
struct FQ8_0 {
  static constexpr int kW = sizeof(BlockQ8_0), kX = sizeof(BlockQ8_0), kXq = 2, kOffset = 128, kQh = -1;
  static constexpr bool kMin = false;
  static void groups(const uint8_t* w, size_t stride, int64_t b, const uint32_t*, __m512i* g) {
    const __m512i bias = _mm512_set1_epi8(-128);
    for (int half = 0; half < 2; ++half) {
      rows16x16(w, stride, static_cast<size_t>(b) * kW + 2 + 16 * static_cast<size_t>(half), g + 4 * half);
      for (int j = 0; j < 4; ++j) g[4 * half + j] = _mm512_xor_si512(g[4 * half + j], bias);
    }
  }
};

// Phase 1 of a panel, row after row (the panel's bytes are one contiguous range, so this is
// a single stream that brings the panel into L1): each block's f16 scales (d, and m for
// Q4_1/Q5_1) and Q5 high bits, as [block][row] so that phase 2 loads 16 rows at once.
struct Scalars {
  std::vector<uint16_t> d, m;
  std::vector<uint32_t> qh;
};

template <class F>
void panel_scalars(const uint8_t* w, size_t w_stride, int64_t nb, Scalars& sc) {
  sc.d.resize(static_cast<size_t>(nb * kRows));
  if (F::kMin) sc.m.resize(static_cast<size_t>(nb * kRows));
  if (F::kQh >= 0) sc.qh.resize(static_cast<size_t>(nb * kRows));
  // Raw pointers: keeps the vectors' members from being reloaded after every store.
  uint16_t* const d = sc.d.data();
  uint16_t* const m = F::kMin ? sc.m.data() : nullptr;
  uint32_t* const qh = F::kQh >= 0 ? sc.qh.data() : nullptr;
  for (int r = 0; r < kRows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * w_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * F::kW;
      d[b * kRows + r] = load_u16(blk);
      if constexpr (F::kMin) m[b * kRows + r] = load_u16(blk + 2);
      if constexpr (F::kQh >= 0) qh[b * kRows + r] = static_cast<uint32_t>(load_i32(blk + F::kQh));
    }
  }
}

// Block b's 16 f16 scales as float lanes.
inline __m512 scales16(const std::vector<uint16_t>& v, int64_t b) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v.data() + b * kRows)));
}

inline const uint32_t* qh16(const Scalars& sc, int64_t b) { return sc.qh.empty() ? nullptr : sc.qh.data() + b * kRows; }

// A panel's rows: the weight rows themselves, or, for a last panel of fewer than 16 rows,
// a zero-padded copy (phase 2 reads 16 rows).
struct PanelRows {
  const uint8_t* w;
  std::vector<uint8_t> padded;
  void set(const uint8_t* rows_at, size_t w_stride, int rows) {
    w = rows_at;
    if (rows == kRows) return;
    padded.assign(kRows * w_stride, 0);
    std::memcpy(padded.data(), rows_at, static_cast<size_t>(rows) * w_stride);
    w = padded.data();
  }
};

// Decode and short batches: each block of the 16 rows unpacked in registers and used at once.
// While computing, the next panel (one contiguous range) is prefetched into L2 a slice per
// block, so memory stays busy (phase 1 then reads it from L2).
template <class F, int J>
void panel_fused(const uint8_t* w, size_t w_stride, int64_t nb, const uint8_t* next, Scalars& sc,
                 Lanes<F, J>& lanes) {
  lanes.zero();
  panel_scalars<F>(w, w_stride, nb, sc);
  const size_t slice = (kRows * w_stride + static_cast<size_t>(nb) - 1) / static_cast<size_t>(nb);
  for (int64_t b = 0; b < nb; ++b) {
    for (size_t l = 0; l < slice; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + static_cast<size_t>(b) * slice + l), _MM_HINT_T1);
    }
    __m512i g[kBlockGroups];
    F::groups(w, w_stride, b, qh16(sc, b), g);
    lanes.block(g, scales16(sc.d, b), F::kMin ? scales16(sc.m, b) : _mm512_setzero_ps(), b);
  }
}

// One 16-row panel unpacked for all blocks: groups [b][8][16 lanes], scales [b][16].
struct Panel {
  std::vector<int32_t> groups;  // 16 lanes per group
  std::vector<float> dw, mw;    // 16 lanes per block
  __m512i* group(int64_t i) { return reinterpret_cast<__m512i*>(groups.data() + i * kRows); }
  const __m512i* group(int64_t i) const { return reinterpret_cast<const __m512i*>(groups.data() + i * kRows); }
};

template <class F>
void unpack_panel(const uint8_t* w, size_t w_stride, int64_t nb, Scalars& sc, Panel& panel) {
  panel.groups.resize(static_cast<size_t>(nb * kBlockGroups * kRows));
  panel.dw.resize(static_cast<size_t>(nb * kRows));
  panel.mw.resize(static_cast<size_t>(nb * kRows));
  panel_scalars<F>(w, w_stride, nb, sc);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i g[kBlockGroups];
    F::groups(w, w_stride, b, qh16(sc, b), g);
    for (int i = 0; i < kBlockGroups; ++i) _mm512_storeu_si512(panel.group(b * kBlockGroups + i), g[i]);
    _mm512_storeu_ps(panel.dw.data() + b * kRows, scales16(sc.d, b));
    _mm512_storeu_ps(panel.mw.data() + b * kRows, F::kMin ? scales16(sc.m, b) : _mm512_setzero_ps());
  }
}

template <class F, int J>
void panel_buffered(const Panel& panel, int64_t nb, const uint8_t* x, size_t x_stride, const ActBlock* acts,
                    float* out, int64_t ldo, __mmask16 mask) {
  Lanes<F, J> lanes{{}, x, x_stride, acts, nb};
  lanes.zero();
  for (int64_t b = 0; b < nb; ++b) {
    lanes.block(panel.group(b * kBlockGroups), _mm512_loadu_ps(panel.dw.data() + b * kRows),
                _mm512_loadu_ps(panel.mw.data() + b * kRows), b);
  }
  lanes.store(out, ldo, mask);
}

template <class F>
void gemm(const void* w, size_t w_stride, int64_t rows, const void* x, size_t x_stride, int64_t n, float* out,
          int64_t ldo, int64_t k) {
  const int64_t nb = k / kQK;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  thread_local std::vector<ActBlock> acts;
  thread_local Panel panel;
  thread_local Scalars scalars;
  thread_local PanelRows panel_rows;
  prepare_acts<F>(xb, x_stride, n, nb, acts);
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kRows, rows - r0));
    panel_rows.set(wb + static_cast<size_t>(r0) * w_stride, w_stride, nr);
    const uint8_t* wr = panel_rows.w;
    const uint8_t* next = wb + static_cast<size_t>(r0 + kRows) * w_stride;
    const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1);
    float* o = out + r0;
    if (n <= kFusedMaxTokens) {
      auto fused = [&](auto lanes) {
        panel_fused(wr, w_stride, nb, next, scalars, lanes);
        lanes.store(o, ldo, mask);
      };
      if (n == 1) fused(Lanes<F, 1>{{}, xb, x_stride, acts.data(), nb});
      if (n == 2) fused(Lanes<F, 2>{{}, xb, x_stride, acts.data(), nb});
      if (n == 3) fused(Lanes<F, 3>{{}, xb, x_stride, acts.data(), nb});
      continue;
    }
    unpack_panel<F>(wr, w_stride, nb, scalars, panel);
    int64_t t = 0;
    for (; t + kTokens <= n; t += kTokens) {
      panel_buffered<F, kTokens>(panel, nb, xb + static_cast<size_t>(t) * x_stride, x_stride,
                                 acts.data() + t * nb, o + t * ldo, ldo, mask);
    }
    const uint8_t* xt = xb + static_cast<size_t>(t) * x_stride;
    const ActBlock* at = acts.data() + t * nb;
    float* ot = o + t * ldo;
    switch (n - t) {
      case 1: panel_buffered<F, 1>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 2: panel_buffered<F, 2>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 3: panel_buffered<F, 3>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 4: panel_buffered<F, 4>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 5: panel_buffered<F, 5>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 6: panel_buffered<F, 6>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      case 7: panel_buffered<F, 7>(panel, nb, xt, x_stride, at, ot, ldo, mask); break;
      default: break;
    }
  }
}

// One row, one token: the same lanes (row 0 of a panel).
template <class F>
float vec_dot(const void* w, const void* x, int64_t k) {
  float out;
  gemm<F>(w, static_cast<size_t>(k / kQK) * F::kW, 1, x, 0, 1, &out, 1, k);
  return out;
}

}  // namespace

const GemmFn kGemmQ4_0Avx512 = gemm<FQ4_0>;
const GemmFn kGemmQ4_1Avx512 = gemm<FQ4_1>;
const GemmFn kGemmQ5_0Avx512 = gemm<FQ5_0>;
const GemmFn kGemmQ5_1Avx512 = gemm<FQ5_1>;
const GemmFn kGemmQ8_0Avx512 = gemm<FQ8_0>;
const VecDotFn kVecDotGemmQ4_0Avx512 = vec_dot<FQ4_0>;
const VecDotFn kVecDotGemmQ4_1Avx512 = vec_dot<FQ4_1>;
const VecDotFn kVecDotGemmQ5_0Avx512 = vec_dot<FQ5_0>;
const VecDotFn kVecDotGemmQ5_1Avx512 = vec_dot<FQ5_1>;
const VecDotFn kVecDotGemmQ8_0Avx512 = vec_dot<FQ8_0>;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const GemmFn kGemmQ4_0Avx512 = nullptr;
const GemmFn kGemmQ4_1Avx512 = nullptr;
const GemmFn kGemmQ5_0Avx512 = nullptr;
const GemmFn kGemmQ5_1Avx512 = nullptr;
const GemmFn kGemmQ8_0Avx512 = nullptr;
const VecDotFn kVecDotGemmQ4_0Avx512 = nullptr;
const VecDotFn kVecDotGemmQ4_1Avx512 = nullptr;
const VecDotFn kVecDotGemmQ5_0Avx512 = nullptr;
const VecDotFn kVecDotGemmQ5_1Avx512 = nullptr;
const VecDotFn kVecDotGemmQ8_0Avx512 = nullptr;
}  // namespace corvid::ops::cpu

#endif
