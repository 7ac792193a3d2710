// CPU causal grouped-query attention over an F32 KV cache.
//
// One task per (query, head), threaded over all of them. Each task walks its key
// range in blocks of kKeyBlock: scores for the block, then one online-softmax
// update (running max m, running sum l, output accumulator rescaled by
// exp(m_old - m_new) only when the max grows). Blocks are aligned to absolute
// cache positions, so a query's arithmetic depends only on its own position and
// the cache contents — never on n or on the thread split (batch invariance).
#include <algorithm>
#include <cmath>
#include <vector>

#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/cpu_ops.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "corvid/ops/cpu/simd.h"
#endif

namespace corvid::ops::cpu {

namespace {

constexpr int64_t kKeyBlock = 64;

float dot(const float* a, const float* b, int64_t d) {
  int64_t i = 0;
  float s = 0;
#if defined(__AVX2__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= d; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= d; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  s = simd::hsum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < d; ++i) s += a[i] * b[i];
  return s;
}

// acc = acc * c + p * v
void scale_axpy(float* acc, float c, float p, const float* v, int64_t d) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256 cv = _mm256_set1_ps(c), pv = _mm256_set1_ps(p);
  for (; i + 8 <= d; i += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), cv);
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), a));
  }
#endif
  for (; i < d; ++i) acc[i] = acc[i] * c + p * v[i];
}

struct Task {
  const float* q;          // [head_dim]
  const float* k;          // cache base for this kv head; row stride `stride`
  const float* v;
  int64_t stride;          // floats between consecutive cache rows
  int64_t lo, hi;          // inclusive key range
  int64_t head_dim;
  float scale;
  float* out;
};

void attend_one(const Task& t, std::vector<float>& acc) {
  const int64_t d = t.head_dim;
  acc.assign(static_cast<size_t>(d), 0.0f);
  float m = -INFINITY, l = 0;
  float s[kKeyBlock];
  // Blocks aligned to absolute positions (multiples of kKeyBlock) for batch invariance.
  for (int64_t b0 = t.lo; b0 <= t.hi;) {
    const int64_t b1 = std::min(t.hi + 1, (b0 / kKeyBlock + 1) * kKeyBlock);
    float bm = -INFINITY;
    for (int64_t j = b0; j < b1; ++j) {
      s[j - b0] = dot(t.q, t.k + j * t.stride, d) * t.scale;
      bm = std::max(bm, s[j - b0]);
    }
    if (bm > m) {
      const float c = std::exp(m - bm);  // 0 on the first block (m = -inf)
      for (int64_t i = 0; i < d; ++i) acc[static_cast<size_t>(i)] *= c;
      l *= c;
      m = bm;
    }
    for (int64_t j = b0; j < b1; ++j) {
      const float p = std::exp(s[j - b0] - m);
      l += p;
      scale_axpy(acc.data(), 1.0f, p, t.v + j * t.stride, d);
    }
    b0 = b1;
  }
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  for (int64_t i = 0; i < d; ++i) t.out[i] = acc[static_cast<size_t>(i)] * inv;
}

}  // namespace

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t n_kv = k_cache.dim(1);
  const int64_t group = n_heads / n_kv;
  const int64_t stride = n_kv * head_dim;
  auto run = [&](int64_t i0, int64_t i1, int) {
    thread_local std::vector<float> acc;
    for (int64_t idx = i0; idx < i1; ++idx) {
      const int64_t i = idx / n_heads, h = idx % n_heads, kvh = h / group;
      const int64_t pos = positions[static_cast<size_t>(i)];
      Task t;
      t.q = q.ptr<float>() + (i * n_heads + h) * head_dim;
      t.k = k_cache.ptr<float>() + kvh * head_dim;
      t.v = v_cache.ptr<float>() + kvh * head_dim;
      t.stride = stride;
      t.hi = pos;
      t.lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      t.head_dim = head_dim;
      t.scale = scale;
      t.out = out.ptr<float>() + (i * n_heads + h) * head_dim;
      attend_one(t, acc);
    }
  };
  const int64_t tasks = n * n_heads;
  // Small calls (a short context at decode) are cheaper on the caller than a hand-off.
  int64_t max_keys = 0;
  for (int32_t p : positions) max_keys = std::max<int64_t>(max_keys, p + 1);
  if (tasks * std::min(max_keys, window > 0 ? window : max_keys) * head_dim < 32768) {
    run(0, tasks, 0);
  } else {
    ThreadPool::global().parallel_for(tasks, run, 1);
  }
}

}  // namespace corvid::ops::cpu
