// BlockPool: the paged KV blocks of one layer group (kv/kv_manager.h). Keys and
// values of every layer of the group live in fixed-size blocks of `block_size`
// positions; a sequence owns a list of blocks (its block table) instead of one
// contiguous cache, so memory is handed out in small pieces as sequences grow and blocks can be shared between
// sequences with a common prefix (kv/prefix_cache.h).
//
// Layout per layer of the group (the spec it is made from): keys and values
// [num_blocks * block_size, kv_heads, head_dim] of the pool's dtype (F32, or F16 /
// BF16 on a GPU); position p of a sequence with table T is row
// T[p / block_size] * block_size + p % block_size of every layer (what
// ops::paged_attention reads).
//
// The pool keeps a free list and a reference count per block. It does not decide
// what happens to a block whose count drops to zero: the prefix cache either keeps
// it (cached, evictable) or returns it with free().
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/layer_tensors.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

class BlockPool {
 public:
  BlockPool(std::span<const LayerState> spec, int64_t block_size, int64_t num_blocks, Device device = Device::CPU,
            const KvFormat& format = DType::F32);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Bytes one block takes over all layers (keys and values).
  static int64_t bytes_per_block(std::span<const LayerState> spec, int64_t block_size,
                                 const KvFormat& format = DType::F32);
  // How many blocks a budget of `bytes` holds (0 if not even one).
  static int64_t blocks_for_budget(std::span<const LayerState> spec, int64_t block_size, int64_t bytes,
                                   const KvFormat& format = DType::F32);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(refcounts_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  Device device() const { return device_; }
  const KvFormat& format() const { return format_; }

  // A block from the free list with a reference count of 1, or nothing when the list is empty.
  std::optional<int32_t> allocate();
  // Another holder of a block (count 0 -> 1 takes a cached block back into use).
  void ref(int32_t block);
  // Drops one reference; returns the count left.
  int32_t unref(int32_t block);
  // Returns an unreferenced block to the free list.
  void free(int32_t block);
  int32_t refcount(int32_t block) const;
  // Blocks with a nonzero count.
  int64_t num_referenced() const { return referenced_; }

  // The storage of the pool's layers (its spec's order), [num_blocks * block_size, kv_heads, head_dim].
  const Tensor& keys(int64_t layer) const { return layers_.keys(layer); }
  const Tensor& values(int64_t layer) const { return layers_.values(layer); }
  int64_t num_layers() const { return layers_.num_layers(); }
  const KvFormat& format(int64_t layer) const { return layers_.format(layer); }

 private:
  void check_block(int32_t block) const;

  int64_t block_size_;
  Device device_;
  KvFormat format_;
  LayerTensors layers_;
  std::vector<int32_t> refcounts_;
  std::vector<uint8_t> on_free_list_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  int64_t referenced_ = 0;
};

}  // namespace corvid
