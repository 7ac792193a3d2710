// KvStore: where a step's attention reads and writes keys and values, layer by
// layer — a contiguous single-sequence cache (KVCache: the row of position p is
// p) or the serving engine's paged pools (KvManager: rows through block tables).
// Both are allocated from a model's state spec; a SharedKV layer's views are its
// source layer's.
#pragma once

#include <cstdint>

#include "corvid/core/tensor.h"
#include "corvid/kv/kv_format.h"

namespace corvid {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // [rows, kv_heads, head_dim] of the store's dtype.
  virtual const Tensor& keys(int64_t layer) const = 0;
  virtual const Tensor& values(int64_t layer) const = 0;
  virtual int64_t num_layers() const = 0;
  virtual Device device() const = 0;
  // false: contiguous, position p is row p; true: rows through block tables.
  virtual bool paged() const = 0;
  // The layer's format (kv/kv_format.h): its tensors' dtypes, and whether keys (and
  // values) are stored in ops::hadamard_rotate's basis, in which the attention layer then
  // rotates queries and keys alike (and rotates the output back).
  virtual KvFormat format(int64_t layer) const { return {keys(layer).dtype, values(layer).dtype, false, false}; }
  // A paged store: positions per block, its block-table groups (layers that share one
  // table: kv/kv_groups.h), each layer's group and the blocks in each group's pool.
  virtual int64_t block_size() const { return 0; }
  virtual int64_t num_groups() const { return 1; }
  virtual int64_t group_of(int64_t /*layer*/) const { return 0; }
  virtual int64_t group_blocks(int64_t /*group*/) const { return 0; }
  // Identifies the store by every buffer a step reads or writes and its format (a
  // recorded step holds their addresses and the format's kernels; a new store can reuse
  // an old one's addresses).
  uint64_t signature() const;
};

}  // namespace corvid
