#include "corvid/kv/block_pool.h"

#include "corvid/core/error.h"
#include "corvid/kv/kv_cache.h"

namespace corvid {

int64_t BlockPool::bytes_per_block(std::span<const LayerState> spec, int64_t block_size, const KvFormat& format) {
  // Each layer in its format (the affine formats' groups never straddle heads).
  return kv_bytes_per_position(spec, format) * block_size;
}

int64_t BlockPool::blocks_for_budget(std::span<const LayerState> spec, int64_t block_size, int64_t bytes,
                                     const KvFormat& format) {
  const int64_t per_block = bytes_per_block(spec, block_size, format);
  return per_block > 0 && bytes > 0 ? bytes / per_block : 0;
}

// The pool's rows, after the checks that must come before any allocation.
static int64_t checked_rows(int64_t block_size, int64_t num_blocks, Device device, const KvFormat& format) {
  check_kv_dtype(format.keys, device);
  check_kv_dtype(format.values, device);
  CORVID_CHECK(block_size > 0, "block pool: block size must be positive, got ", block_size);
  CORVID_CHECK(num_blocks > 0 && num_blocks <= INT32_MAX / block_size, "block pool: ", num_blocks,
               " blocks is not a usable pool size");
  return num_blocks * block_size;
}

BlockPool::BlockPool(std::span<const LayerState> spec, int64_t block_size, int64_t num_blocks, Device device,
                     const KvFormat& format)
    : block_size_(block_size), device_(device), format_(format),
      layers_(spec, checked_rows(block_size, num_blocks, device, format), device, format) {
  refcounts_.assign(static_cast<size_t>(num_blocks), 0);
  on_free_list_.assign(static_cast<size_t>(num_blocks), 1);
  // Lowest ids on top of the stack (handed out first), which keeps tests readable.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

void BlockPool::check_block(int32_t block) const {
  CORVID_CHECK(block >= 0 && block < num_blocks(), "block pool: block ", block, " outside [0, ", num_blocks(), ")");
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t block = free_.back();
  free_.pop_back();
  on_free_list_[static_cast<size_t>(block)] = 0;
  refcounts_[static_cast<size_t>(block)] = 1;
  ++referenced_;
  return block;
}

void BlockPool::ref(int32_t block) {
  check_block(block);
  CORVID_CHECK(!on_free_list_[static_cast<size_t>(block)], "block pool: block ", block, " is free");
  if (refcounts_[static_cast<size_t>(block)]++ == 0) ++referenced_;
}

int32_t BlockPool::unref(int32_t block) {
  check_block(block);
  int32_t& count = refcounts_[static_cast<size_t>(block)];
  CORVID_CHECK(count > 0, "block pool: block ", block, " released more often than referenced");
  if (--count == 0) --referenced_;
  return count;
}

void BlockPool::free(int32_t block) {
  check_block(block);
  CORVID_CHECK(refcounts_[static_cast<size_t>(block)] == 0, "block pool: block ", block, " is still referenced");
  CORVID_CHECK(!on_free_list_[static_cast<size_t>(block)], "block pool: block ", block, " freed twice");
  on_free_list_[static_cast<size_t>(block)] = 1;
  free_.push_back(block);
}

int32_t BlockPool::refcount(int32_t block) const {
  check_block(block);
  return refcounts_[static_cast<size_t>(block)];
}

}  // namespace corvid
