// PrefixCache: reuse of KV blocks between sequences that start with the same
// tokens (a shared system prompt, a chat's earlier turns, a preempted request
// coming back).
//
// Only full blocks are cached. A block is named by hash(parent block's hash, its
// own token ids), so a hash stands for the whole prefix up to the end of the block
// and a lookup walks a new prompt block by block until the first miss. Hits are
// verified against the stored token ids, so a hash collision can never hand out
// wrong keys and values.
//
// Blocks in use are reference-counted in the BlockPool; a cached block whose count
// drops to zero stays cached (evictable) and goes to the back of an LRU list. When
// the pool's free list is empty, allocate() evicts the least recently released one.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "corvid/kv/block_pool.h"

namespace corvid {

class PrefixCache {
 public:
  // enabled = false: nothing is ever cached (every released block is freed at once).
  explicit PrefixCache(BlockPool& pool, bool enabled = true);

  static constexpr uint64_t kRootHash = 0x6a09e667f3bcc908ull;  // the "parent" of a sequence's first block
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

  struct Prefix {
    std::vector<int32_t> blocks;   // one reference taken on each
    std::vector<uint64_t> hashes;  // their hashes (the chain the caller continues)
    int64_t tokens() const;        // set by acquire_prefix: blocks.size() * block_size
    int64_t block_size = 0;
  };
  // The longest run of cached full blocks that starts `tokens`, covering at most
  // max_tokens tokens; takes a reference on each block (release() them when done).
  Prefix acquire_prefix(std::span<const int32_t> tokens, int64_t max_tokens);
  // The cached block holding `tokens` (one full block) under `hash`, if any; takes no
  // reference. Hits are checked against the stored token ids.
  std::optional<int32_t> find(uint64_t hash, std::span<const int32_t> tokens) const;
  // Takes a reference on a block find() returned (out of the LRU list if it was evictable).
  void take(int32_t block);

  // A fresh block (count 1): from the free list, else by evicting the least
  // recently released cached block; nothing when every block is in use.
  std::optional<int32_t> allocate();
  // Registers `block`, which holds `tokens` (exactly one full block) after the prefix
  // named by `parent`, under `hash`. Returns false (the block stays private) when the
  // cache is disabled or the same content is already cached in another block.
  bool insert(uint64_t hash, std::span<const int32_t> tokens, int32_t block);
  // Drops one reference; an unreferenced block becomes evictable if cached, else free.
  void release(int32_t block);

  // Blocks that allocate() can still hand out (free + evictable).
  int64_t num_available() const { return pool_.num_free() + static_cast<int64_t>(lru_.size()); }
  int64_t num_cached() const { return static_cast<int64_t>(by_hash_.size()); }
  int64_t num_evictable() const { return static_cast<int64_t>(lru_.size()); }
  // The evictable blocks, least recently released first (tests, stats).
  std::vector<int32_t> eviction_order() const { return {lru_.begin(), lru_.end()}; }
  bool is_cached(int32_t block) const { return entries_[static_cast<size_t>(block)].cached; }
  BlockPool& pool() { return pool_; }
  bool enabled() const { return enabled_; }

 private:
  struct Entry {
    bool cached = false;
    bool evictable = false;  // on lru_
    uint64_t hash = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru_pos;
  };

  BlockPool& pool_;
  bool enabled_;
  std::vector<Entry> entries_;  // per block
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::list<int32_t> lru_;  // unreferenced cached blocks, least recently released first
};

}  // namespace corvid
