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

// The positions [begin, end) of a sequence a group's storage keeps. Every position, unless
// the delayed switch (--kv-quant-start) splits a layer's keys and values in two: a head
// group keeps [0, N) in a 16-bit format (f32 on the CPU), the layer's own group the rest
// in its coded format. A split group's positions are counted from its begin (a contiguous
// store's row of position p is p - begin; a paged store's block tables start there).
struct KvSegment {
  int64_t begin = 0;
  int64_t end = INT64_MAX;
  bool operator==(const KvSegment&) const = default;
};

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
  // The delayed switch: the group holding the layer's head positions (its own group,
  // group_of, holds the rest), or -1 when the layer is not split; the head's tensors and
  // format; and the positions each group keeps.
  virtual int64_t head_group_of(int64_t /*layer*/) const { return -1; }
  virtual const Tensor& head_keys(int64_t layer) const;
  virtual const Tensor& head_values(int64_t layer) const;
  virtual KvFormat head_format(int64_t layer) const;
  virtual KvSegment segment(int64_t /*group*/) const { return {}; }
  // Identifies the store by every buffer a step reads or writes and its format (a
  // recorded step holds their addresses and the format's kernels; a new store can reuse
  // an old one's addresses).
  uint64_t signature() const;
};

}  // namespace corvid
