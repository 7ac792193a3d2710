#include "corvid/kv/prefix_cache.h"

#include <algorithm>

#include "corvid/core/error.h"

namespace corvid {

namespace {
// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t PrefixCache::hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ static_cast<uint64_t>(tokens.size()));
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

int64_t PrefixCache::Prefix::tokens() const { return static_cast<int64_t>(blocks.size()) * block_size; }

PrefixCache::PrefixCache(BlockPool& pool, bool enabled)
    : pool_(pool), enabled_(enabled), entries_(static_cast<size_t>(pool.num_blocks())) {}

std::optional<int32_t> PrefixCache::find(uint64_t hash, std::span<const int32_t> tokens) const {
  if (!enabled_) return std::nullopt;
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Entry& e = entries_[static_cast<size_t>(it->second)];
  if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return it->second;
}

void PrefixCache::take(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  CORVID_CHECK(e.cached, "prefix cache: block ", block, " is not cached");
  if (e.evictable) {
    lru_.erase(e.lru_pos);
    e.evictable = false;
  }
  pool_.ref(block);
}

PrefixCache::Prefix PrefixCache::acquire_prefix(std::span<const int32_t> tokens, int64_t max_tokens) {
  const int64_t bs = pool_.block_size();
  Prefix prefix;
  prefix.block_size = bs;
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  uint64_t parent = kRootHash;
  for (int64_t b = 0; (b + 1) * bs <= limit; ++b) {
    const std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
    const uint64_t h = hash_block(parent, block_tokens);
    const std::optional<int32_t> block = find(h, block_tokens);
    if (!block) break;
    take(*block);
    prefix.blocks.push_back(*block);
    prefix.hashes.push_back(h);
    parent = h;
  }
  return prefix;
}

std::optional<int32_t> PrefixCache::allocate() {
  if (auto block = pool_.allocate()) return block;
  if (lru_.empty()) return std::nullopt;
  const int32_t victim = lru_.front();
  lru_.pop_front();
  Entry& e = entries_[static_cast<size_t>(victim)];
  by_hash_.erase(e.hash);
  e = Entry{};
  pool_.free(victim);
  return pool_.allocate();
}

bool PrefixCache::insert(uint64_t hash, std::span<const int32_t> tokens, int32_t block) {
  CORVID_CHECK(static_cast<int64_t>(tokens.size()) == pool_.block_size(), "prefix cache: a block holds ",
               pool_.block_size(), " tokens, got ", tokens.size());
  CORVID_CHECK(pool_.refcount(block) > 0, "prefix cache: block ", block, " is not in use");
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!enabled_ || e.cached || by_hash_.count(hash)) return false;
  e.cached = true;
  e.hash = hash;
  e.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, block);
  return true;
}

void PrefixCache::release(int32_t block) {
  if (pool_.unref(block) > 0) return;
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.cached) {
    e.lru_pos = lru_.insert(lru_.end(), block);
    e.evictable = true;
  } else {
    pool_.free(block);
  }
}

}  // namespace corvid
