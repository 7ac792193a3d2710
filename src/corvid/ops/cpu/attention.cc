// CPU causal grouped-query attention over a contiguous F32 KV cache.
//
// One task per (query, GQA group) — or per (query, head) when that leaves too few
// tasks for the pool — threaded over all of them; attention_kernel.h holds the
// per-task arithmetic (shared with paged_attention.cc).
#include <algorithm>
#include <cmath>

#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/attention_kernel.h"
#include "corvid/ops/cpu/cpu_ops.h"

namespace corvid::ops::cpu {

using attention_kernel::GroupTask;
using attention_kernel::Scratch;

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t n_kv = k_cache.dim(1);
  const int64_t group = n_heads / n_kv;
  ThreadPool& pool = ThreadPool::global();
  // Tasks cover whole GQA groups (K/V read once per group) when there are enough of them to
  // keep the pool busy; otherwise (decode with few kv heads) single heads. Same bits either way.
  const int64_t heads_per_task = n * n_kv >= 2 * pool.size() ? group : 1;
  const int64_t tasks_per_query = n_heads / heads_per_task;
  auto run = [&](int64_t i0, int64_t i1, int) {
    thread_local Scratch scratch;
    for (int64_t idx = i0; idx < i1; ++idx) {
      const int64_t i = idx / tasks_per_query, h0 = (idx % tasks_per_query) * heads_per_task, kvh = h0 / group;
      const int64_t pos = positions[static_cast<size_t>(i)];
      GroupTask t;
      t.q = q.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.k = k_cache.ptr<float>() + kvh * head_dim;
      t.v = v_cache.ptr<float>() + kvh * head_dim;
      t.out = out.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.heads = heads_per_task;
      t.stride = n_kv * head_dim;
      t.hi = pos;
      t.lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      t.head_dim = head_dim;
      t.scale = scale;
      attention_kernel::attend_group(t, [](int64_t key_pos) { return key_pos; }, scratch);
    }
  };
  const int64_t tasks = n * tasks_per_query;
  // Small calls (a short context at decode) are cheaper on the caller than a hand-off.
  int64_t max_keys = 0;
  for (int32_t p : positions) max_keys = std::max<int64_t>(max_keys, p + 1);
  if (n * n_heads * std::min(max_keys, window > 0 ? window : max_keys) * head_dim < 32768) {
    run(0, tasks, 0);
  } else {
    pool.parallel_for(tasks, run, 1);
  }
}

}  // namespace corvid::ops::cpu
