#include "corvid/kv/kv_manager.h"

#include <algorithm>
#include <climits>

#include "corvid/core/error.h"
#include "corvid/kv/kv_cache.h"

namespace corvid {

int64_t KvManager::sliding_blocks_for_chunk(int64_t window, int64_t chunk, int64_t block_size) {
  // Positions [start - window + 1, start + chunk) span at most this many blocks.
  return (chunk + window - 2) / block_size + 2;
}

std::vector<int64_t> KvManager::plan_blocks(std::span<const KvGroup> groups, const KvManagerConfig& c) {
  if (c.num_blocks > 0) return std::vector<int64_t>(groups.size(), c.num_blocks);
  std::vector<int64_t> bytes(groups.size());
  std::vector<int64_t> blocks(groups.size(), 0);
  int64_t budget = c.budget_bytes, head_bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    bytes[g] = BlockPool::bytes_per_block(groups[g].spec, c.block_size, c.format);
    if (groups[g].segment.end != INT64_MAX) head_bytes += bytes[g];
  }
  // Head groups (the delayed switch) first: max_seqs sequences' heads, at most half the
  // budget between them (each holds the same number of heads), at least one head.
  if (head_bytes > 0) {
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].segment.end == INT64_MAX) continue;
      const int64_t per_head = groups[g].segment.end / c.block_size;
      blocks[g] = std::max(per_head, std::min(c.max_seqs * per_head, c.budget_bytes / 2 / head_bytes));
      budget -= blocks[g] * bytes[g];
    }
  }
  int64_t all = 0;
  bool any_full = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].segment.end != INT64_MAX) continue;
    all += bytes[g];
    any_full |= groups[g].kind == StateKind::FullKV;
  }
  // What every group would get if each layer kept every position (one uniform pool).
  const int64_t uniform = all > 0 ? std::max<int64_t>(budget, 0) / all : 0;
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].segment.end == INT64_MAX) blocks[g] = uniform;
  if (!any_full) return blocks;
  int64_t left = budget;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].kind != StateKind::SlidingKV) continue;
    const int64_t w = groups[g].window;
    const int64_t need = c.max_seqs * sliding_blocks_for_chunk(w, 1, c.block_size) +
                         sliding_blocks_for_chunk(w, c.max_chunk, c.block_size);
    blocks[g] = std::max(std::min(need, uniform), sliding_blocks_for_chunk(w, c.max_chunk, c.block_size));
    left -= blocks[g] * bytes[g];
  }
  // Full groups (more than one when layers have formats of their own) split what is
  // left so that each holds the same number of positions: a position needs a block in
  // every one of them.
  auto tail_full = [&groups](size_t g) {
    return groups[g].kind == StateKind::FullKV && groups[g].segment.end == INT64_MAX;
  };
  int64_t full_bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g)
    if (tail_full(g)) full_bytes += bytes[g];
  for (size_t g = 0; g < groups.size(); ++g)
    if (tail_full(g)) blocks[g] = left > 0 ? left / full_bytes : 0;
  return blocks;
}

KvManager::KvManager(std::span<const LayerState> spec, const KvManagerConfig& config) : config_(config) {
  const int64_t bs = config.block_size;
  CORVID_CHECK(bs > 0, "kv: block_size must be positive, got ", bs);
  CORVID_CHECK(config.max_seqs > 0 && config.max_chunk > 0, "kv: max_seqs and max_chunk must be positive");
  KvGrouping grouping = group_layers(spec);
  groups_ = std::move(grouping.groups);
  layer_group_ = std::move(grouping.group_of);
  layer_index_ = std::move(grouping.index_of);
  layer_head_group_.assign(layer_group_.size(), -1);
  CORVID_CHECK(config.quant_start >= 0, "kv: --kv-quant-start must not be negative, got ", config.quant_start);
  if (config.quant_start > 0) split_heads((config.quant_start + bs - 1) / bs);
  for (const KvGroup& group : groups_) {
    const std::string name = group.name();
    uint64_t salt = 0xcbf29ce484222325ull;  // FNV-1a of the name: format and segment
    for (const char ch : name) salt = (salt ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
    cache_salt_.push_back(salt);
  }
  const std::vector<int64_t> blocks = plan_blocks(groups_, config);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const KvGroup& group = groups_[g];
    CORVID_CHECK(blocks[g] > 0, "kv: a KV cache budget of ", config.budget_bytes, " bytes holds no block of the ",
                 group.name(), " layers (one block of ", bs, " positions takes ",
                 BlockPool::bytes_per_block(group.spec, bs, config.format), " bytes)");
    if (group.kind == StateKind::SlidingKV) {
      const int64_t lone = sliding_blocks_for_chunk(group.window, config.max_chunk, bs);
      CORVID_CHECK(blocks[g] >= lone, "kv: the ", group.name(), " layers need ", lone, " blocks for one sequence's ",
                   config.max_chunk, "-token chunk, but the KV cache gives them ", blocks[g],
                   " (raise the KV cache size or lower max_num_batched_tokens)");
    }
    pools_.push_back(std::make_unique<BlockPool>(group.spec, bs, blocks[g], config.device, config.format));
    caches_.push_back(std::make_unique<PrefixCache>(*pools_.back(), config.prefix_caching));
  }
  peak_held_.assign(groups_.size(), 0);
}

void KvManager::split_heads(int64_t blocks) {
  const int64_t start = blocks * config_.block_size;
  const DType plain = config_.head_dtype.value_or(default_kv_dtype(config_.device));
  const size_t n = groups_.size();
  for (size_t g = 0; g < n; ++g) {
    KvGroup& tail = groups_[g];
    const KvFormat coded = tail.format.value_or(config_.format);
    if (tail.kind != StateKind::FullKV || !kv_format_coded(coded)) continue;
    KvGroup head = tail;
    head.format = kv_head_format(coded, plain);
    for (LayerState& s : head.spec) s.format = head.format;
    head.segment = {0, start};
    tail.segment = {start, INT64_MAX};
    groups_.push_back(std::move(head));
    for (size_t l = 0; l < layer_group_.size(); ++l)
      if (layer_group_[l] == static_cast<int64_t>(g)) layer_head_group_[l] = static_cast<int64_t>(groups_.size() - 1);
  }
}

int64_t KvManager::end_block(size_t g) const {
  const int64_t end = groups_[g].segment.end;
  return end == INT64_MAX ? INT64_MAX : end / config_.block_size;
}

const BlockPool& KvManager::head_pool(int64_t layer) const {
  const int64_t g = head_group_of(layer);
  CORVID_CHECK(g >= 0, "kv: layer ", layer, " keeps no head positions apart");
  return *pools_[static_cast<size_t>(g)];
}

const Tensor& KvManager::head_keys(int64_t layer) const {
  return head_pool(layer).keys(layer_index_[static_cast<size_t>(layer)]);
}

const Tensor& KvManager::head_values(int64_t layer) const {
  return head_pool(layer).values(layer_index_[static_cast<size_t>(layer)]);
}

KvFormat KvManager::head_format(int64_t layer) const {
  return head_pool(layer).format(layer_index_[static_cast<size_t>(layer)]);
}

KvFormat KvManager::format(int64_t layer) const {
  return pools_[static_cast<size_t>(group_of(layer))]->format(layer_index_[static_cast<size_t>(layer)]);
}

const Tensor& KvManager::keys(int64_t layer) const {
  return pools_[static_cast<size_t>(group_of(layer))]->keys(layer_index_[static_cast<size_t>(layer)]);
}

const Tensor& KvManager::values(int64_t layer) const {
  return pools_[static_cast<size_t>(group_of(layer))]->values(layer_index_[static_cast<size_t>(layer)]);
}

int64_t KvManager::first_visible_block(size_t g, int64_t pos) const {
  const KvGroup& group = groups_[g];
  if (group.kind != StateKind::SlidingKV) return 0;
  return std::max<int64_t>(0, pos - group.window + 1) / config_.block_size;
}

void KvManager::note_held(size_t g, const std::vector<int32_t>& table, int64_t first_held) {
  const int64_t end = std::min(static_cast<int64_t>(table.size()), end_block(g));
  peak_held_[g] = std::max(peak_held_[g], end - std::max(first_held, begin_block(g)));
}

int64_t KvManager::acquire_prefix(std::span<const int32_t> tokens, int64_t max_tokens, SequenceKv& seq) {
  CORVID_CHECK(seq.empty(), "kv: acquire_prefix for a sequence that holds blocks");
  const size_t n_groups = groups_.size();
  const int64_t bs = config_.block_size;
  seq.tables.assign(n_groups, {});
  seq.first_held.assign(n_groups, 0);
  seq.hashes.clear();
  if (!config_.prefix_caching) return 0;
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  const int64_t m = std::max<int64_t>(limit, 0) / bs;
  auto block_tokens = [&](int64_t b) {
    return tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
  };
  std::vector<uint64_t> hashes(static_cast<size_t>(m));
  uint64_t parent = PrefixCache::kRootHash;
  for (int64_t b = 0; b < m; ++b) parent = hashes[static_cast<size_t>(b)] = PrefixCache::hash_block(parent, block_tokens(b));
  // hit[g][b]: the cached block of group g holding block b, or kNoBlock.
  std::vector<std::vector<int32_t>> hit(n_groups, std::vector<int32_t>(static_cast<size_t>(m), SequenceKv::kNoBlock));
  int64_t k = m;
  for (size_t g = 0; g < n_groups; ++g) {
    const bool full = groups_[g].kind != StateKind::SlidingKV;
    for (int64_t b = begin_block(g); b < std::min(m, end_block(g)); ++b) {
      const std::optional<int32_t> block = caches_[g]->find(cache_key(g, hashes[static_cast<size_t>(b)]), block_tokens(b));
      if (block) hit[g][static_cast<size_t>(b)] = *block;
      else if (full) {
        k = std::min(k, b);  // a full group reuses only an unbroken run from the start
        break;
      }
    }
  }
  // The longest prefix whose every sliding group has the window before its end.
  for (; k > 0; --k) {
    bool ok = true;
    for (size_t g = 0; g < n_groups && ok; ++g)
      for (int64_t b = std::max(first_visible_block(g, k * bs), begin_block(g)); b < std::min(k, end_block(g)) && ok; ++b)
        ok = hit[g][static_cast<size_t>(b)] >= 0;
    if (ok) break;
  }
  for (size_t g = 0; g < n_groups; ++g) {
    const int64_t first = first_visible_block(g, k * bs);
    std::vector<int32_t>& table = seq.tables[g];
    table.assign(static_cast<size_t>(k), SequenceKv::kNoBlock);
    for (int64_t b = std::max(first, begin_block(g)); b < std::min(k, end_block(g)); ++b) {
      caches_[g]->take(hit[g][static_cast<size_t>(b)]);
      table[static_cast<size_t>(b)] = hit[g][static_cast<size_t>(b)];
    }
    seq.first_held[g] = std::min(first, k);
    note_held(g, table, seq.first_held[g]);
  }
  seq.hashes.assign(hashes.begin(), hashes.begin() + k);
  return k * bs;
}

bool KvManager::reserve(SequenceKv& seq, int64_t start, int64_t end) {
  const size_t n_groups = groups_.size();
  if (seq.empty()) {
    seq.tables.assign(n_groups, {});
    seq.first_held.assign(n_groups, 0);
  }
  const int64_t bs = config_.block_size, need = (end + bs - 1) / bs;
  for (size_t g = 0; g < n_groups; ++g) {
    std::vector<int32_t>& table = seq.tables[g];
    if (static_cast<int64_t>(table.size()) < need) table.resize(static_cast<size_t>(need), SequenceKv::kNoBlock);
    const int64_t first = std::max({seq.first_held[g], first_visible_block(g, start), begin_block(g)});
    for (int64_t b = first; b < std::min(need, end_block(g)); ++b) {
      int32_t& entry = table[static_cast<size_t>(b)];
      if (entry != SequenceKv::kNoBlock) continue;
      const std::optional<int32_t> block = caches_[g]->allocate();
      if (!block) return false;
      entry = *block;
    }
    note_held(g, table, seq.first_held[g]);
  }
  return true;
}

void KvManager::commit(SequenceKv& seq, std::span<const int32_t> tokens, int64_t computed) {
  const int64_t bs = config_.block_size;
  CORVID_CHECK(computed <= static_cast<int64_t>(tokens.size()), "kv: commit of ", computed, " positions for ",
               tokens.size(), " tokens");
  for (size_t b = seq.hashes.size(); static_cast<int64_t>(b + 1) * bs <= computed; ++b) {
    const std::span<const int32_t> block_tokens = tokens.subspan(b * static_cast<size_t>(bs), static_cast<size_t>(bs));
    const uint64_t parent = b == 0 ? PrefixCache::kRootHash : seq.hashes[b - 1];
    const uint64_t hash = PrefixCache::hash_block(parent, block_tokens);
    for (size_t g = 0; g < groups_.size(); ++g) {
      const int32_t block = b < seq.tables[g].size() ? seq.tables[g][b] : SequenceKv::kNoBlock;
      if (block != SequenceKv::kNoBlock) caches_[g]->insert(cache_key(g, hash), block_tokens, block);
    }
    seq.hashes.push_back(hash);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<int32_t>& table = seq.tables[g];
    const int64_t first = std::min<int64_t>(first_visible_block(g, computed), static_cast<int64_t>(table.size()));
    for (int64_t b = seq.first_held[g]; b < first; ++b) {
      int32_t& entry = table[static_cast<size_t>(b)];
      if (entry != SequenceKv::kNoBlock) caches_[g]->release(entry);
      entry = SequenceKv::kNoBlock;
    }
    seq.first_held[g] = std::max(seq.first_held[g], first);
  }
}

void KvManager::release(SequenceKv& seq) {
  for (size_t g = 0; g < seq.tables.size(); ++g)
    for (auto it = seq.tables[g].rbegin(); it != seq.tables[g].rend(); ++it)
      if (*it != SequenceKv::kNoBlock) caches_[g]->release(*it);
  seq.tables.clear();
  seq.first_held.clear();
  seq.hashes.clear();
}

int64_t KvManager::max_positions_per_sequence() const {
  int64_t limit = INT32_MAX;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].kind == StateKind::SlidingKV) continue;
    const int64_t held = groups_[g].segment.begin + pools_[g]->num_blocks() * config_.block_size;
    if (held < groups_[g].segment.end) limit = std::min(limit, held);
  }
  return limit;
}

int64_t KvManager::total_bytes() const {
  int64_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g)
    total += pools_[g]->num_blocks() * BlockPool::bytes_per_block(groups_[g].spec, config_.block_size, config_.format);
  return total;
}

std::vector<KvGroupStats> KvManager::group_stats() const {
  std::vector<KvGroupStats> out;
  for (size_t g = 0; g < groups_.size(); ++g)
    out.push_back({groups_[g].name(), groups_[g].window, pools_[g]->num_blocks(), pools_[g]->num_referenced(),
                   caches_[g]->num_cached(), peak_held_[g]});
  return out;
}

int64_t KvManager::blocks_total() const {
  int64_t n = 0;
  for (const auto& p : pools_) n += p->num_blocks();
  return n;
}

int64_t KvManager::blocks_used() const {
  int64_t n = 0;
  for (const auto& p : pools_) n += p->num_referenced();
  return n;
}

int64_t KvManager::blocks_cached() const {
  int64_t n = 0;
  for (const auto& c : caches_) n += c->num_cached();
  return n;
}

}  // namespace corvid
