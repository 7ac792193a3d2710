// CPU causal grouped-query attention over a contiguous F32 KV cache.
//
// One task per (query, GQA group) — or per (query, head) when that leaves too few
// tasks for the pool — threaded over all of them; attention_kernel.h holds the tasks
// and their arithmetic (shared with paged_attention.cc).
#include "corvid/ops/cpu/attention_kernel.h"
#include "corvid/ops/cpu/cpu_ops.h"

namespace corvid::ops::cpu {

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out, const Tensor* lse) {
  // Position p of every query is cache row p.
  auto rows = [](int64_t) { return [](int64_t key_pos) { return key_pos; }; };
  attention_kernel::attend_all(q, k_cache, v_cache, positions, scale, window, out, lse, rows);
}

void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse) {
  const int64_t rows = out.dim(0) * out.dim(1), d = out.dim(2);
  float* o = out.ptr<float>();
  const float* o2 = other.ptr<float>();
  const float* a = lse.ptr<float>();
  const float* b = other_lse.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* x = o + r * d;
    const float* y = o2 + r * d;
    // A part that saw no key has lse -inf and an undefined row: it is dropped, not weighted.
    if (b[r] == -INFINITY) continue;
    if (a[r] == -INFINITY) {
      std::copy(y, y + d, x);
      continue;
    }
    const float m = std::max(a[r], b[r]);
    const float wa = std::exp(a[r] - m), wb = std::exp(b[r] - m);
    const float inv = 1.0f / (wa + wb);
    for (int64_t i = 0; i < d; ++i) x[i] = (wa * x[i] + wb * y[i]) * inv;
  }
}

}  // namespace corvid::ops::cpu
