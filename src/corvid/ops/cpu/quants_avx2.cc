// AVX2 (+VNNI where present) dot products of the 32-element block formats.
//
// Performance notes. Per 32-element block the work is: unpack the weight quants
// to 32 bytes, one u8*s8 dot (vpdpbusd with VNNI) into 8 int32 lanes, convert to
// float, one FMA with the block's combined scale. The int32 -> float conversion
// per block is unavoidable because every block has its own scale. Two blocks per
// iteration with separate accumulators hide the FMA latency; the reduction order
// is fixed (acc0 + acc1, then a fixed horizontal sum), so the result depends only
// on the inputs, never on threading or batch shape.
#include "corvid/ops/cpu/quants.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstring>

#include "corvid/core/half.h"
#include "corvid/ops/cpu/simd.h"

namespace corvid::ops::cpu {

namespace {

using namespace simd;

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m256 scale2(uint16_t a, uint16_t b) { return _mm256_set1_ps(f16_to_f32(a) * f16_to_f32(b)); }

inline uint32_t qh32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Generic two-accumulator loop; `block_dot(i)` returns the block's int32 lanes and scale.
template <class BlockFn, class ExtraFn>
inline float dot_loop(int64_t nb, BlockFn block_dot, ExtraFn extra) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float extra_sum = 0;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    __m256 s0, s1;
    const __m256i d0 = block_dot(i, &s0);
    const __m256i d1 = block_dot(i + 1, &s1);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), s0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), s1, acc1);
    extra_sum += extra(i) + extra(i + 1);
  }
  if (i < nb) {
    __m256 s0;
    const __m256i d0 = block_dot(i, &s0);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), s0, acc0);
    extra_sum += extra(i);
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + extra_sum;
}

float dot_q4_0(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  const __m256i eight = _mm256_set1_epi8(8);
  return dot_loop(
      k / kQK,
      [&](int64_t i, __m256* s) {
        *s = scale2(bw[i].d, bx[i].d);
        const __m256i q = _mm256_sub_epi8(unpack_nibbles(bw[i].qs), eight);
        return dot_s8s8(_mm256_setzero_si256(), q, load32(bx[i].qs));
      },
      [](int64_t) { return 0.0f; });
}

float dot_q4_1(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_1*>(w);
  const auto* bx = static_cast<const BlockQ8_1*>(x);
  return dot_loop(
      k / kQK,
      [&](int64_t i, __m256* s) {
        *s = scale2(bw[i].d, bx[i].d);
        return dot_u8s8(_mm256_setzero_si256(), unpack_nibbles(bw[i].qs), load32(bx[i].qs));
      },
      [&](int64_t i) { return f16_to_f32(bw[i].m) * f16_to_f32(bx[i].s); });
}

float dot_q5_0(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  const __m256i sixteen = _mm256_set1_epi8(16);
  return dot_loop(
      k / kQK,
      [&](int64_t i, __m256* s) {
        *s = scale2(bw[i].d, bx[i].d);
        __m256i q = _mm256_or_si256(unpack_nibbles(bw[i].qs), expand_bits_to_0x10(qh32(bw[i].qh)));
        q = _mm256_sub_epi8(q, sixteen);
        return dot_s8s8(_mm256_setzero_si256(), q, load32(bx[i].qs));
      },
      [](int64_t) { return 0.0f; });
}

float dot_q5_1(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_1*>(w);
  const auto* bx = static_cast<const BlockQ8_1*>(x);
  return dot_loop(
      k / kQK,
      [&](int64_t i, __m256* s) {
        *s = scale2(bw[i].d, bx[i].d);
        const __m256i q = _mm256_or_si256(unpack_nibbles(bw[i].qs), expand_bits_to_0x10(qh32(bw[i].qh)));
        return dot_u8s8(_mm256_setzero_si256(), q, load32(bx[i].qs));
      },
      [&](int64_t i) { return f16_to_f32(bw[i].m) * f16_to_f32(bx[i].s); });
}

float dot_q8_0(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ8_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  return dot_loop(
      k / kQK,
      [&](int64_t i, __m256* s) {
        *s = scale2(bw[i].d, bx[i].d);
        return dot_s8s8(_mm256_setzero_si256(), load32(bw[i].qs), load32(bx[i].qs));
      },
      [](int64_t) { return 0.0f; });
}

// Activation quantizers, bit-identical to the scalar reference (same float ops in the same
// order per element; vcvtps2dq rounds to nearest even like lrintf). Vectorized because at
// n = 1 the row is quantized serially before the threaded dot products start.
inline int quantize_q8_block(const float* x, float* d_out, int8_t* qs) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float d = _mm_cvtss_f32(m) / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0 ? 1.0f / d : 0.0f);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id));
  const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  // packs interleave 128-bit lanes; the permute restores element order.
  const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
  const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs),
                      _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *d_out = d;
  return sum;
}

void quantize_q8_0(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    quantize_q8_block(x, &d, b[i].qs);
    b[i].d = f32_to_f16(d);
  }
}

void quantize_q8_1(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    const int sum = quantize_q8_block(x, &d, b[i].qs);
    b[i].d = f32_to_f16(d);
    b[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

}  // namespace

const QuantizeRowFn kQuantizeQ8_0Simd = quantize_q8_0;
const QuantizeRowFn kQuantizeQ8_1Simd = quantize_q8_1;
const VecDotFn kVecDotQ4_0Simd = dot_q4_0;
const VecDotFn kVecDotQ4_1Simd = dot_q4_1;
const VecDotFn kVecDotQ5_0Simd = dot_q5_0;
const VecDotFn kVecDotQ5_1Simd = dot_q5_1;
const VecDotFn kVecDotQ8_0Simd = dot_q8_0;

}  // namespace corvid::ops::cpu

#else

namespace corvid::ops::cpu {
const QuantizeRowFn kQuantizeQ8_0Simd = nullptr;
const QuantizeRowFn kQuantizeQ8_1Simd = nullptr;
const VecDotFn kVecDotQ4_0Simd = nullptr;
const VecDotFn kVecDotQ4_1Simd = nullptr;
const VecDotFn kVecDotQ5_0Simd = nullptr;
const VecDotFn kVecDotQ5_1Simd = nullptr;
const VecDotFn kVecDotQ8_0Simd = nullptr;
}  // namespace corvid::ops::cpu

#endif
