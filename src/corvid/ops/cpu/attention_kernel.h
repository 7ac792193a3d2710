// The CPU attention kernel shared by ops::attention (contiguous cache) and
// ops::paged_attention (block tables). Both instantiate attend_group with a
// different "position -> cache row" map and otherwise run the same arithmetic, so
// a query gives the same bits from a paged cache as from a contiguous one.
//
// One call covers one query row and one kv head, for the query heads that share it
// (GQA). The key range is walked in blocks of kKeyBlock aligned to absolute
// positions: scores for the block (each K row read once for the group), then one
// online-softmax update per head (running max m, running sum l, output accumulator
// rescaled by exp(m_old - m_new) only when the max grows), then the V rows (each
// read once for the group). A query's arithmetic depends only on its position and
// the cache contents — never on the batch or the thread split (batch invariance).
// A coded cache (ops/kv_codec.h) is read the same way: each K or V row the group
// needs is decoded once into the task's scratch, then the same arithmetic runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/kv_codec.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "corvid/ops/cpu/simd.h"
#endif

namespace corvid::ops::cpu::attention_kernel {

constexpr int64_t kKeyBlock = 64;

inline float dot(const float* a, const float* b, int64_t d) {
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

// acc += p * v
inline void axpy(float* acc, float p, const float* v, int64_t d) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256 pv = _mm256_set1_ps(p);
  for (; i + 8 <= d; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
#endif
  for (; i < d; ++i) acc[i] += p * v[i];
}

// s[j] = exp(s[j] - m) for j < n. The SIMD body/scalar tail split depends only on n (the
// block's key count, fixed by absolute positions), so results stay batch invariant.
inline void exp_shifted(float* s, int64_t n, float m) {
  int64_t j = 0;
#if defined(__AVX2__)
  const __m256 mv = _mm256_set1_ps(m);
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, simd::exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv)));
#endif
  for (; j < n; ++j) s[j] = std::exp(s[j] - m);
}

// One query row over one kv head, for query heads [0, heads) of a GQA group. Each
// head's arithmetic is the same whatever the group size, so splitting a group into
// single heads gives equal bits.
struct GroupTask {
  const float* q;     // first head's query [head_dim]; heads follow at head_dim stride
  const uint8_t* k;   // cache base for this kv head; row r at k + r * k_stride
  const uint8_t* v;   // row r at v + r * v_stride
  DType k_dtype, v_dtype;  // the caches': F32 or a coded format (TurboQuant's differ)
  float* out;         // first head's output
  float* lse;         // null, or the first head's log-sum-exp (heads follow at stride 1)
  int64_t heads;      // heads in the group
  int64_t k_stride, v_stride;  // bytes between consecutive cache rows
  int64_t lo, hi;     // inclusive key position range
  int64_t head_dim;
  float scale;
};

struct Scratch {
  std::vector<float> acc, scores, m, l, row;
};

// Cache row r of one kv head (at `base`, rows `stride` bytes apart) as head_dim floats:
// in place for F32, else dequantized into `row`.
inline const float* cache_row(DType dtype, const uint8_t* base, int64_t stride, int64_t r, int64_t head_dim,
                              std::vector<float>& row) {
  const uint8_t* p = base + r * stride;
  if (dtype == DType::F32) return reinterpret_cast<const float*>(p);
  row.resize(static_cast<size_t>(head_dim));
  kv_codec::decode(dtype, p, head_dim, row.data());
  return row.data();
}

// row_of(position) -> the cache row holding that position's key and value.
template <class RowOf>
void attend_group(const GroupTask& t, const RowOf& row_of, Scratch& sc) {
  const int64_t d = t.head_dim, g = t.heads;
  sc.acc.assign(static_cast<size_t>(g * d), 0.0f);
  sc.scores.resize(static_cast<size_t>(g * kKeyBlock));
  sc.m.assign(static_cast<size_t>(g), -INFINITY);
  sc.l.assign(static_cast<size_t>(g), 0.0f);
  // Blocks aligned to absolute positions (multiples of kKeyBlock) for batch invariance.
  for (int64_t b0 = t.lo; b0 <= t.hi;) {
    const int64_t b1 = std::min(t.hi + 1, (b0 / kKeyBlock + 1) * kKeyBlock);
    const int64_t nk = b1 - b0;
    for (int64_t j = 0; j < nk; ++j) {
      const float* kr = cache_row(t.k_dtype, t.k, t.k_stride, row_of(b0 + j), d, sc.row);
      for (int64_t h = 0; h < g; ++h)
        sc.scores[static_cast<size_t>(h * kKeyBlock + j)] = dot(t.q + h * d, kr, d) * t.scale;
    }
    for (int64_t h = 0; h < g; ++h) {
      float* s = sc.scores.data() + h * kKeyBlock;
      float bm = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) bm = std::max(bm, s[j]);
      float& m = sc.m[static_cast<size_t>(h)];
      float& l = sc.l[static_cast<size_t>(h)];
      if (bm > m) {
        const float c = std::exp(m - bm);  // 0 on the first block (m = -inf)
        float* acc = sc.acc.data() + h * d;
        for (int64_t i = 0; i < d; ++i) acc[i] *= c;
        l *= c;
        m = bm;
      }
      exp_shifted(s, nk, m);  // s[j] = exp(s[j] - m)
      for (int64_t j = 0; j < nk; ++j) l += s[j];
    }
    for (int64_t j = 0; j < nk; ++j) {
      const float* vr = cache_row(t.v_dtype, t.v, t.v_stride, row_of(b0 + j), d, sc.row);
      for (int64_t h = 0; h < g; ++h)
        axpy(sc.acc.data() + h * d, sc.scores[static_cast<size_t>(h * kKeyBlock + j)], vr, d);
    }
    b0 = b1;
  }
  for (int64_t h = 0; h < g; ++h) {
    const float l = sc.l[static_cast<size_t>(h)];
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    const float* acc = sc.acc.data() + h * d;
    for (int64_t i = 0; i < d; ++i) t.out[h * d + i] = acc[i] * inv;
    if (t.lse) t.lse[h] = l > 0 ? sc.m[static_cast<size_t>(h)] + std::log(l) : -INFINITY;
  }
}

// Every (query, head group) of a call (a query at a negative position sees no key: out 0,
// lse -inf): q [n, heads, head_dim] over caches of [rows,
// kv_heads, head_dim], query i's positions mapped to cache rows by row_map(i) (a
// callable for attend_group). Tasks cover whole GQA groups (K/V read once per group)
// when there are enough of them to keep the pool busy; otherwise (decode with few kv
// heads) single heads. Same bits either way. Small calls (a short context at decode)
// run on the caller, cheaper than a hand-off.
template <class RowMap>
void attend_all(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
                float scale, int64_t window, const Tensor& out, const Tensor* lse, const RowMap& row_map) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t n_kv = k_cache.dim(1);
  const int64_t group = n_heads / n_kv;
  const auto k_head_bytes = static_cast<int64_t>(bytes_for(k_cache.dtype, head_dim));
  const auto v_head_bytes = static_cast<int64_t>(bytes_for(v_cache.dtype, head_dim));
  ThreadPool& pool = ThreadPool::global();
  const int64_t heads_per_task = n * n_kv >= 2 * pool.size() ? group : 1;
  const int64_t tasks_per_query = n_heads / heads_per_task;
  auto run = [&](int64_t i0, int64_t i1, int) {
    thread_local Scratch scratch;
    for (int64_t idx = i0; idx < i1; ++idx) {
      const int64_t i = idx / tasks_per_query, h0 = (idx % tasks_per_query) * heads_per_task, kvh = h0 / group;
      const int64_t pos = positions[static_cast<size_t>(i)];
      GroupTask t;
      t.q = q.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.k = static_cast<const uint8_t*>(k_cache.data) + k_head_bytes * kvh;
      t.v = static_cast<const uint8_t*>(v_cache.data) + v_head_bytes * kvh;
      t.k_dtype = k_cache.dtype;
      t.v_dtype = v_cache.dtype;
      t.out = out.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.lse = lse ? lse->ptr<float>() + i * n_heads + h0 : nullptr;
      t.heads = heads_per_task;
      t.k_stride = k_head_bytes * n_kv;
      t.v_stride = v_head_bytes * n_kv;
      t.hi = pos;
      t.lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      t.head_dim = head_dim;
      t.scale = scale;
      attend_group(t, row_map(i), scratch);
    }
  };
  const int64_t tasks = n * tasks_per_query;
  int64_t max_keys = 0;
  for (int32_t p : positions) max_keys = std::max<int64_t>(max_keys, p + 1);
  if (n * n_heads * std::min(max_keys, window > 0 ? window : max_keys) * head_dim < 32768) {
    run(0, tasks, 0);
  } else {
    pool.parallel_for(tasks, run, 1);
  }
}

}  // namespace corvid::ops::cpu::attention_kernel
