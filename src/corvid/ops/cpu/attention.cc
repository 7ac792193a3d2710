// CPU causal grouped-query attention over a contiguous F32 KV cache.
//
// One task per (query, GQA group) — or per (query, head) when that leaves too few
// tasks for the pool — threaded over all of them; attention_kernel.h holds the tasks
// and their arithmetic (shared with paged_attention.cc).
#include "corvid/ops/cpu/attention_kernel.h"
#include "corvid/ops/cpu/cpu_ops.h"

namespace corvid::ops::cpu {

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out) {
  // Position p of every query is cache row p.
  auto rows = [](int64_t) { return [](int64_t key_pos) { return key_pos; }; };
  attention_kernel::attend_all(q, k_cache, v_cache, positions, scale, window, out, rows);
}

}  // namespace corvid::ops::cpu
