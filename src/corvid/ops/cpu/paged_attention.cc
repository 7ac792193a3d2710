// CPU paged attention: queries of many sequences in one call, each over its own
// sequence's keys and values scattered in fixed-size blocks of a shared pool.
// The arithmetic is attention_kernel.h's, as for the contiguous cache; only the
// position -> row map differs (through the block table), so a sequence gets the
// same bits whether its cache is paged or contiguous, batched or alone.
#include <algorithm>

#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/attention_kernel.h"
#include "corvid/ops/cpu/cpu_ops.h"

namespace corvid::ops::cpu {

void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     std::span<const int32_t> positions, float scale, int64_t window, const Tensor& out) {
  using attention_kernel::GroupTask;
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t n_kv = k_pool.dim(1);
  const int64_t group = n_heads / n_kv;
  const int64_t block_size = paged.block_size;
  ThreadPool& pool = ThreadPool::global();
  // As in attention(): whole GQA groups per task when there are enough tasks, else single heads.
  const int64_t heads_per_task = n * n_kv >= 2 * pool.size() ? group : 1;
  const int64_t tasks_per_query = n_heads / heads_per_task;
  auto run = [&](int64_t i0, int64_t i1, int) {
    thread_local attention_kernel::Scratch scratch;
    for (int64_t idx = i0; idx < i1; ++idx) {
      const int64_t i = idx / tasks_per_query, h0 = (idx % tasks_per_query) * heads_per_task, kvh = h0 / group;
      const int64_t pos = positions[static_cast<size_t>(i)];
      const int32_t* table =
          paged.block_tables.data() + static_cast<int64_t>(paged.query_seq[static_cast<size_t>(i)]) * paged.max_blocks;
      GroupTask t;
      t.q = q.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.k = k_pool.ptr<float>() + kvh * head_dim;
      t.v = v_pool.ptr<float>() + kvh * head_dim;
      t.out = out.ptr<float>() + (i * n_heads + h0) * head_dim;
      t.heads = heads_per_task;
      t.stride = n_kv * head_dim;
      t.hi = pos;
      t.lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      t.head_dim = head_dim;
      t.scale = scale;
      auto row_of = [table, block_size](int64_t key_pos) {
        return static_cast<int64_t>(table[key_pos / block_size]) * block_size + key_pos % block_size;
      };
      attention_kernel::attend_group(t, row_of, scratch);
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

}  // namespace corvid::ops::cpu
