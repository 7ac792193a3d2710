// Where a query's key/value row j (a position of its own sequence) lives in the
// cache, for the attention kernels: one contiguous cache per call (ops::attention),
// or block tables into a shared pool (ops::paged_attention). The kernels are
// templates over these, so both layouts run the same arithmetic.
#pragma once

#include <cstdint>

namespace corvid::ops::cuda {

// Row j of every query is cache row j.
struct ContiguousKv {
  __device__ __forceinline__ int64_t row(int /*query*/, int64_t j) const { return j; }
};

// Query t belongs to sequence query_seq[t]; its position j lives in pool row
// table[j / block_size] * block_size + j % block_size, table = that sequence's row
// of the [n_seqs, max_blocks] block tables.
struct PagedKv {
  const int32_t* tables = nullptr;
  const int32_t* query_seq = nullptr;
  int max_blocks = 0;
  int block_size = 0;
  __device__ __forceinline__ int64_t row(int query, int64_t j) const {
    const int32_t* table = tables + static_cast<int64_t>(query_seq[query]) * max_blocks;
    return static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
  }
};

// Every query of the call is in one sequence with this block table (a prefill chunk).
struct SequenceKv {
  const int32_t* table = nullptr;
  int block_size = 0;
  __device__ __forceinline__ int64_t row(int /*query*/, int64_t j) const {
    return static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
  }
};

}  // namespace corvid::ops::cuda
