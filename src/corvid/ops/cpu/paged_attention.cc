// CPU paged attention: queries of many sequences in one call, each over its own
// sequence's keys and values scattered in fixed-size blocks of a shared pool.
// The arithmetic is attention_kernel.h's, as for the contiguous cache; only the
// position -> row map differs (through the block table), so a sequence gets the
// same bits whether its cache is paged or contiguous, batched or alone.
#include "corvid/ops/cpu/attention_kernel.h"
#include "corvid/ops/cpu/cpu_ops.h"

namespace corvid::ops::cpu {

void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     std::span<const int32_t> positions, float scale, int64_t window, const Tensor& out,
                     const Tensor* lse) {
  const int64_t block_size = paged.block_size;
  // Query i's position p is in its sequence's block table[p / block_size], at p % block_size.
  auto rows = [&paged, block_size](int64_t i) {
    const int32_t* table =
        paged.block_tables.data() + static_cast<int64_t>(paged.query_seq[static_cast<size_t>(i)]) * paged.max_blocks;
    return [table, block_size](int64_t key_pos) {
      return static_cast<int64_t>(table[key_pos / block_size]) * block_size + key_pos % block_size;
    };
  };
  attention_kernel::attend_all(q, k_pool, v_pool, positions, scale, window, out, lse, rows);
}

}  // namespace corvid::ops::cpu
