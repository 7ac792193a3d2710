// KvManager: the serving engine's paged KV state, the one thing the scheduler
// asks for blocks. The model's state spec is split into layer groups by what a
// layer keeps (kv/kv_groups.h): all full-attention layers share one group, the
// sliding-window layers of one window another; a SharedKV layer reads its source's
// group. Each group has its own block pool and prefix cache, and each sequence one
// block table per group, all indexed by absolute position (entry p / block_size).
//
// A full group keeps every block of a sequence. A sliding group keeps only the
// blocks the next query can see: once a block lies wholly before the window of the
// next position, commit() releases it (to the prefix cache when it was cached) and
// its table entry becomes kNoBlock. So a sliding group holds about window /
// block_size blocks per sequence however long it grows.
//
// Prefix caching runs per group under one hash chain (a block's hash names the
// tokens up to its end, whatever the group): a prefix of k blocks is reused only
// when every full group has all k cached and every sliding group has the blocks
// of the window before position k * block_size.
//
// The delayed switch (quant_start > 0): a full group of a coded format keeps a
// sequence's first positions (quant_start rounded up to whole blocks) apart, in a head
// group of 16-bit keys and values (f32 on the CPU) with its own pool and prefix cache;
// the coded group keeps the blocks from there on. A sequence holds at most that many
// head blocks, so the head pool is sized for max_seqs sequences' heads (at most half the
// budget). Blocks are never converted from one format to the other: the head stays
// exact for the whole life of a sequence (a system prompt, the attention sinks), and a
// block's format never changes under a prefix-cache hit. Each group's cache keys mix the
// group's format and segment into the block hash, so no hit can cross formats.
//
// The manager is also the paged KvStore the runner and the model read: keys(layer)
// and values(layer) are views into the layer's group pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_groups.h"
#include "corvid/kv/kv_store.h"
#include "corvid/kv/prefix_cache.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

struct KvManagerConfig {
  int64_t block_size = 16;
  int64_t budget_bytes = int64_t{1} << 30;  // split between the groups (see KvManager::plan_blocks)
  int64_t num_blocks = 0;                   // > 0: exactly this many blocks in every group (tests)
  Device device = Device::CPU;
  KvFormat format = DType::F32;  // every layer's, unless the spec gives one its own
  // The delayed switch: positions a coded layer keeps in 16 bits (default_kv_dtype) before
  // its format takes over; 0: none. Rounded up to whole blocks.
  int64_t quant_start = 0;
  std::optional<DType> head_dtype;  // the head's dtype; unset: default_kv_dtype (bf16 on CUDA, f32 on the CPU)
  bool prefix_caching = true;
  // What the scheduler may ask at once, for sizing sliding groups: sequences in one
  // step, and the longest chunk one sequence runs in a step.
  int64_t max_seqs = 64;
  int64_t max_chunk = 512;
};

// One sequence's blocks: a table per group, and the hashes of its full blocks so far.
struct SequenceKv {
  static constexpr int32_t kNoBlock = -1;  // an entry a sliding group released (or never needed)
  std::vector<std::vector<int32_t>> tables;  // per group, entry b: the block of positions [b * bs, (b + 1) * bs)
  std::vector<int64_t> first_held;          // per group: entries before it are kNoBlock
  std::vector<uint64_t> hashes;             // of its full blocks registered so far
  bool empty() const { return tables.empty(); }
};

struct KvGroupStats {
  std::string name;  // "full", "sliding 512"
  int64_t window = 0;
  int64_t blocks_total = 0, blocks_used = 0, blocks_cached = 0;
  int64_t peak_blocks_per_sequence = 0;  // the most blocks one sequence has held at once
};

class KvManager final : public KvStore {
 public:
  KvManager(std::span<const LayerState> spec, const KvManagerConfig& config);

  // Blocks of each group for a budget: a sliding group gets what max_seqs sequences at
  // their window need (never more than a full layer's share, never less than one
  // sequence's worst chunk), every full group shares the rest in proportion to its bytes.
  static std::vector<int64_t> plan_blocks(std::span<const KvGroup> groups, const KvManagerConfig& config);
  // Blocks a sliding group of `window` needs for one sequence running `chunk` positions.
  static int64_t sliding_blocks_for_chunk(int64_t window, int64_t chunk, int64_t block_size);

  // ---- the scheduler's side ----
  // A new sequence: takes the longest cached prefix of `tokens` (at most max_tokens) in
  // every group and returns how many tokens it covers (a multiple of block_size).
  int64_t acquire_prefix(std::span<const int32_t> tokens, int64_t max_tokens, SequenceKv& seq);
  // Grows seq's tables to cover running positions [start, end): false when some group is
  // out of blocks (what it took stays in seq; release() returns it).
  bool reserve(SequenceKv& seq, int64_t start, int64_t end);
  // After a step computed seq's positions up to `computed`: caches its newly full blocks
  // (tokens[0, computed) hold their ids) and releases sliding blocks the next query no
  // longer sees.
  void commit(SequenceKv& seq, std::span<const int32_t> tokens, int64_t computed);
  // Returns every block of seq (the last ones first: a shared prefix outlives the tails).
  void release(SequenceKv& seq);

  // ---- capacity ----
  // The longest sequence the pools can hold (the full groups bound it; a model of only
  // sliding layers is bounded by none: INT32_MAX).
  int64_t max_positions_per_sequence() const;
  // Bytes of every group's blocks.
  int64_t total_bytes() const;

  // ---- statistics ----
  std::vector<KvGroupStats> group_stats() const;
  int64_t blocks_total() const;
  int64_t blocks_used() const;
  int64_t blocks_cached() const;
  int64_t query_tokens() const { return query_tokens_; }
  int64_t hit_tokens() const { return hit_tokens_; }
  // Adds one lookup: `queried` tokens looked up, `hit` of them found.
  void record_lookup(int64_t queried, int64_t hit) {
    query_tokens_ += queried;
    hit_tokens_ += hit;
  }
  const std::vector<KvGroup>& groups() const { return groups_; }

  // ---- KvStore ----
  const Tensor& keys(int64_t layer) const override;
  const Tensor& values(int64_t layer) const override;
  int64_t num_layers() const override { return static_cast<int64_t>(layer_group_.size()); }
  Device device() const override { return config_.device; }
  bool paged() const override { return true; }
  KvFormat format(int64_t layer) const override;
  int64_t block_size() const override { return config_.block_size; }
  int64_t num_groups() const override { return static_cast<int64_t>(groups_.size()); }
  int64_t group_of(int64_t layer) const override { return layer_group_[static_cast<size_t>(layer)]; }
  int64_t group_blocks(int64_t group) const override { return pools_[static_cast<size_t>(group)]->num_blocks(); }
  int64_t head_group_of(int64_t layer) const override { return layer_head_group_[static_cast<size_t>(layer)]; }
  const Tensor& head_keys(int64_t layer) const override;
  const Tensor& head_values(int64_t layer) const override;
  KvFormat head_format(int64_t layer) const override;
  KvSegment segment(int64_t group) const override { return groups_[static_cast<size_t>(group)].segment; }
  const KvFormat& format() const { return config_.format; }

 private:
  // The first table entry the query at `pos` reads in group g (0 for a full group).
  int64_t first_visible_block(size_t g, int64_t pos) const;
  // The table entries group g holds blocks for: [begin_block, end_block).
  int64_t begin_block(size_t g) const { return groups_[g].segment.begin / config_.block_size; }
  int64_t end_block(size_t g) const;
  // Group g's prefix-cache key of a block hash: the hash with the group's format and segment.
  uint64_t cache_key(size_t g, uint64_t hash) const { return hash ^ cache_salt_[g]; }
  // The pool of the layer's head group (the delayed switch); throws when it has none.
  const BlockPool& head_pool(int64_t layer) const;
  // The delayed switch: each full group of a coded format gets a head group.
  void split_heads(int64_t blocks);
  void note_held(size_t g, const std::vector<int32_t>& table, int64_t first_held);

  KvManagerConfig config_;
  std::vector<KvGroup> groups_;
  std::vector<int64_t> layer_group_, layer_index_;  // per layer: its group and its index in the group
  std::vector<int64_t> layer_head_group_;           // per layer: its head group (the delayed switch) or -1
  std::vector<uint64_t> cache_salt_;                // per group
  std::vector<std::unique_ptr<BlockPool>> pools_;
  std::vector<std::unique_ptr<PrefixCache>> caches_;
  std::vector<int64_t> peak_held_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace corvid
