// Float-weight dot products. Performance notes: four independent 8-lane FMA
// accumulators (32 elements per iteration) keep both FMA ports busy; F16 uses
// F16C's vcvtph2ps, BF16 is a zero-extend and shift. The accumulators are
// combined in a fixed order so the result depends only on the inputs.
#include "corvid/ops/cpu/float_dot.h"

#include "corvid/core/half.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "corvid/ops/cpu/simd.h"
#endif

namespace corvid::ops::cpu {

namespace {
template <class Load>
float dot_scalar(const float* x, int64_t k, Load load) {
  // Four partial sums like the SIMD kernel's structure, so rounding is similar.
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    for (int j = 0; j < 4; ++j) s[j] += load(i + j) * x[i + j];
  }
  for (; i < k; ++i) s[0] += load(i) * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}
}  // namespace

float dot_f32_scalar(const void* w, const void* x, int64_t k) {
  const auto* wf = static_cast<const float*>(w);
  return dot_scalar(static_cast<const float*>(x), k, [wf](int64_t i) { return wf[i]; });
}

float dot_f16_scalar(const void* w, const void* x, int64_t k) {
  const auto* wh = static_cast<const uint16_t*>(w);
  return dot_scalar(static_cast<const float*>(x), k, [wh](int64_t i) { return f16_to_f32(wh[i]); });
}

float dot_bf16_scalar(const void* w, const void* x, int64_t k) {
  const auto* wh = static_cast<const uint16_t*>(w);
  return dot_scalar(static_cast<const float*>(x), k, [wh](int64_t i) { return bf16_to_f32(wh[i]); });
}

#if defined(__AVX2__)
namespace {

template <class Load8, class Load1>
float dot_avx2(const float* x, int64_t k, Load8 load8, Load1 load1) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load8(i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8(i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8(i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), a0);
  float s = simd::hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < k; ++i) s += load1(i) * x[i];
  return s;
}

float dot_f32(const void* w, const void* x, int64_t k) {
  const auto* wf = static_cast<const float*>(w);
  return dot_avx2(
      static_cast<const float*>(x), k, [wf](int64_t i) { return _mm256_loadu_ps(wf + i); },
      [wf](int64_t i) { return wf[i]; });
}

float dot_f16(const void* w, const void* x, int64_t k) {
  const auto* wh = static_cast<const uint16_t*>(w);
  return dot_avx2(
      static_cast<const float*>(x), k,
      [wh](int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i))); },
      [wh](int64_t i) { return f16_to_f32(wh[i]); });
}

float dot_bf16(const void* w, const void* x, int64_t k) {
  const auto* wh = static_cast<const uint16_t*>(w);
  return dot_avx2(
      static_cast<const float*>(x), k,
      [wh](int64_t i) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      },
      [wh](int64_t i) { return bf16_to_f32(wh[i]); });
}

}  // namespace

const VecDotFn kDotF32Simd = dot_f32;
const VecDotFn kDotF16Simd = dot_f16;
const VecDotFn kDotBF16Simd = dot_bf16;
#else
const VecDotFn kDotF32Simd = nullptr;
const VecDotFn kDotF16Simd = nullptr;
const VecDotFn kDotBF16Simd = nullptr;
#endif

}  // namespace corvid::ops::cpu
