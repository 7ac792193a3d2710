// The paged KV cache: BlockPool (free list, reference counts, sizing), PrefixCache
// (block hashing, longest-prefix lookup, sharing, LRU eviction) and
// ops::paged_attention (the same bits as ops::attention over the same keys and
// values gathered into a contiguous cache, under random block tables).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/prefix_cache.h"
#include "corvid/ops/ops.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using namespace corvid::testing;

std::vector<LayerState> tiny_config() { return uniform_kv_spec(/*layers=*/2, /*kv_heads=*/2, /*head_dim=*/8); }

TEST(BlockPool, SizesFromByteBudget) {
  const std::vector<LayerState> c = tiny_config();
  // 2 (K and V) x 2 layers x 4 positions x 2 heads x 8 dims x 4 bytes.
  EXPECT_EQ(BlockPool::bytes_per_block(c, 4), 2 * 2 * 4 * 2 * 8 * 4);
  EXPECT_EQ(BlockPool::blocks_for_budget(c, 4, 10 * 1024 + 5), 10);
  EXPECT_EQ(BlockPool::blocks_for_budget(c, 4, 100), 0);
  BlockPool pool(c, 4, 10);
  EXPECT_EQ(pool.num_blocks(), 10);
  EXPECT_EQ(pool.keys(1).ndim, 3);
  EXPECT_EQ(pool.keys(1).dim(0), 40);
  EXPECT_EQ(pool.keys(1).dim(1), 2);
  EXPECT_EQ(pool.keys(1).dim(2), 8);
  EXPECT_THROW(BlockPool(c, 0, 10), Error);
  EXPECT_THROW(BlockPool(c, 4, 0), Error);
}

// 16-bit caches (a GPU's default) take half the bytes, so a budget holds twice the
// blocks; the CPU's kernels read F32 only, so a 16-bit cache there is refused up front,
// by the cache and by the ops.
TEST(BlockPool, HalfPrecisionSizesAndCpuRefusal) {
  const std::vector<LayerState> c = tiny_config();
  EXPECT_EQ(BlockPool::bytes_per_block(c, 4, DType::BF16), 2 * 2 * 4 * 2 * 8 * 2);
  EXPECT_EQ(BlockPool::bytes_per_block(c, 4, DType::F16), BlockPool::bytes_per_block(c, 4) / 2);
  EXPECT_EQ(BlockPool::blocks_for_budget(c, 4, 10 * 1024 + 5, DType::BF16), 20);
  EXPECT_EQ(default_kv_dtype(Device::CPU), DType::F32);
  EXPECT_EQ(default_kv_dtype(Device::CUDA), DType::BF16);
  EXPECT_THROW(BlockPool(c, 4, 10, Device::CPU, DType::BF16), Error);
  EXPECT_THROW(KVCache(c, 16, Device::CPU, DType::F16), Error);
  EXPECT_THROW(BlockPool(c, 4, 10, Device::CPU, DType::Q8_0), Error);
  const KVCache f32(c, 16);
  EXPECT_EQ(f32.format(), KvFormat(DType::F32));
  EXPECT_EQ(f32.keys(0).dtype, DType::F32);

  std::vector<uint16_t> half_cache(16 * 2 * 8);
  const Tensor k16(DType::BF16, {16, 2, 8}, half_cache.data());
  OwnedTensor q = f32_tensor({1, 4, 8}, std::vector<float>(32, 0.5f));
  OwnedTensor out(DType::F32, {1, 4, 8});
  const std::vector<int32_t> pos = {3};
  try {
    ops::attention(q.tensor, k16, k16, pos, 0.35f, 0, out.tensor);
    ADD_FAILURE() << "a BF16 cache on the CPU was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("F16 or BF16 on CUDA"), std::string::npos) << e.what();
  }
  OwnedTensor kf = f32_tensor({16, 2, 8}, std::vector<float>(256, 0.0f));
  EXPECT_THROW(ops::attention(q.tensor, kf.tensor, k16, pos, 0.35f, 0, out.tensor), Error);  // mixed dtypes
}

TEST(BlockPool, AllocatesUntilEmptyAndCountsReferences) {
  BlockPool pool(tiny_config(), 4, 3);
  std::vector<int32_t> got;
  while (auto b = pool.allocate()) got.push_back(*b);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_referenced(), 3);
  pool.ref(1);
  EXPECT_EQ(pool.refcount(1), 2);
  EXPECT_EQ(pool.unref(1), 1);
  EXPECT_EQ(pool.unref(1), 0);
  EXPECT_THROW(pool.unref(1), Error);
  pool.free(1);
  EXPECT_THROW(pool.free(1), Error);
  EXPECT_THROW(pool.free(0), Error);  // still referenced
  EXPECT_THROW(pool.ref(1), Error);   // free blocks cannot be shared
  EXPECT_THROW(pool.ref(7), Error);
  EXPECT_EQ(pool.allocate(), std::optional<int32_t>(1));
}

std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Fills a sequence's blocks and registers them, as the scheduler does.
std::vector<int32_t> cache_sequence(PrefixCache& cache, const std::vector<int32_t>& tokens) {
  const int64_t bs = cache.pool().block_size();
  std::vector<int32_t> blocks;
  uint64_t parent = PrefixCache::kRootHash;
  for (size_t b = 0; (b + 1) * static_cast<size_t>(bs) <= tokens.size(); ++b) {
    blocks.push_back(*cache.allocate());
    const std::span<const int32_t> part(tokens.data() + b * static_cast<size_t>(bs), static_cast<size_t>(bs));
    parent = PrefixCache::hash_block(parent, part);
    cache.insert(parent, part, blocks.back());
  }
  return blocks;
}

TEST(PrefixCache, HashesChainThroughTheParent) {
  const auto a = iota_tokens(4), b = iota_tokens(4, 200);
  EXPECT_NE(PrefixCache::hash_block(PrefixCache::kRootHash, a), PrefixCache::hash_block(PrefixCache::kRootHash, b));
  const uint64_t ha = PrefixCache::hash_block(PrefixCache::kRootHash, a);
  const uint64_t hb = PrefixCache::hash_block(PrefixCache::kRootHash, b);
  // The same block after different prefixes is a different block.
  EXPECT_NE(PrefixCache::hash_block(ha, b), PrefixCache::hash_block(hb, b));
  EXPECT_EQ(PrefixCache::hash_block(ha, b), PrefixCache::hash_block(ha, b));
}

TEST(PrefixCache, FindsTheLongestCachedPrefixAndSharesIt) {
  BlockPool pool(tiny_config(), 4, 8);
  PrefixCache cache(pool);
  const auto tokens = iota_tokens(10);  // two full blocks and a partial one
  const auto blocks = cache_sequence(cache, tokens);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(cache.num_cached(), 2);

  auto other = iota_tokens(12);
  other[9] = 7;  // differs in the third block only
  PrefixCache::Prefix hit = cache.acquire_prefix(other, static_cast<int64_t>(other.size()) - 1);
  EXPECT_EQ(hit.blocks, blocks);
  EXPECT_EQ(hit.tokens(), 8);
  EXPECT_EQ(pool.refcount(blocks[0]), 2);

  // A differing first block finds nothing; max_tokens caps the match.
  auto miss = iota_tokens(12);
  miss[0] = 1;
  EXPECT_TRUE(cache.acquire_prefix(miss, 12).blocks.empty());
  EXPECT_EQ(cache.acquire_prefix(other, 7).blocks.size(), 1u);
  cache.release(blocks[0]);  // the reference the last lookup took

  for (int32_t b : hit.blocks) cache.release(b);
  for (int32_t b : blocks) cache.release(b);
  EXPECT_EQ(pool.num_referenced(), 0);
  EXPECT_EQ(cache.num_evictable(), 2);  // kept for the next request
  EXPECT_EQ(cache.acquire_prefix(tokens, 9).blocks, blocks);
  EXPECT_EQ(cache.num_evictable(), 0);  // in use again
}

TEST(PrefixCache, DuplicateContentStaysPrivateAndIsFreed) {
  BlockPool pool(tiny_config(), 4, 4);
  PrefixCache cache(pool);
  const auto tokens = iota_tokens(4);
  const auto first = cache_sequence(cache, tokens);
  const auto second = cache_sequence(cache, tokens);  // computed concurrently: not cached twice
  EXPECT_EQ(cache.num_cached(), 1);
  EXPECT_FALSE(cache.is_cached(second[0]));
  cache.release(second[0]);
  EXPECT_EQ(pool.num_free(), 3);
  cache.release(first[0]);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(cache.num_evictable(), 1);
}

TEST(PrefixCache, EvictsLeastRecentlyReleasedFirst) {
  BlockPool pool(tiny_config(), 2, 4);
  PrefixCache cache(pool);
  const auto a = cache_sequence(cache, iota_tokens(2, 10));
  const auto b = cache_sequence(cache, iota_tokens(2, 20));
  const auto c = cache_sequence(cache, iota_tokens(2, 30));
  cache.release(b[0]);
  cache.release(a[0]);
  cache.release(c[0]);
  EXPECT_EQ(cache.eviction_order(), (std::vector<int32_t>{b[0], a[0], c[0]}));
  // Touching a cached block moves it to the back when released again.
  const auto again = cache.acquire_prefix(iota_tokens(2, 20), 2);
  ASSERT_EQ(again.blocks, b);
  cache.release(b[0]);
  EXPECT_EQ(cache.eviction_order(), (std::vector<int32_t>{a[0], c[0], b[0]}));

  EXPECT_TRUE(cache.allocate().has_value());  // the one free block
  EXPECT_EQ(cache.allocate(), std::optional<int32_t>(a[0]));  // then the LRU victim
  EXPECT_TRUE(cache.acquire_prefix(iota_tokens(2, 10), 2).blocks.empty());
  EXPECT_EQ(cache.allocate(), std::optional<int32_t>(c[0]));
  EXPECT_EQ(cache.allocate(), std::optional<int32_t>(b[0]));
  EXPECT_FALSE(cache.allocate().has_value());
  EXPECT_EQ(cache.num_cached(), 0);
}

TEST(PrefixCache, DisabledCachesNothing) {
  BlockPool pool(tiny_config(), 2, 4);
  PrefixCache cache(pool, /*enabled=*/false);
  const auto a = cache_sequence(cache, iota_tokens(4));
  cache.release(a[0]);
  cache.release(a[1]);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_TRUE(cache.acquire_prefix(iota_tokens(4), 4).blocks.empty());
}

// Random sequences scattered over a pool through random block tables: every query's
// output equals ops::attention over its sequence gathered into a contiguous cache, bit
// for bit, with and without a sliding window.
void check_paged_equals_contiguous(int64_t block_size, int64_t window, uint32_t seed) {
  const int64_t heads = 4, kv_heads = 2, d = 16;
  const std::vector<int64_t> lengths = {1, 5, 70, 130, 33};
  const int64_t max_blocks = (130 + block_size - 1) / block_size;
  const int64_t num_blocks = static_cast<int64_t>(lengths.size()) * max_blocks + 3;  // some never used
  std::mt19937 rng(seed);
  OwnedTensor k_pool(DType::F32, {num_blocks * block_size, kv_heads, d});
  OwnedTensor v_pool(DType::F32, {num_blocks * block_size, kv_heads, d});
  const auto kv_values = random_floats(static_cast<size_t>(2 * k_pool.tensor.numel()), seed);
  std::memcpy(k_pool.tensor.data, kv_values.data(), k_pool.tensor.nbytes());
  std::memcpy(v_pool.tensor.data, kv_values.data() + k_pool.tensor.numel(), v_pool.tensor.nbytes());
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);

  std::vector<int32_t> tables(lengths.size() * static_cast<size_t>(max_blocks), -1);
  size_t next_id = 0;
  std::vector<int32_t> query_seq, positions;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int64_t b = 0; b * block_size < lengths[s]; ++b) tables[s * max_blocks + static_cast<size_t>(b)] = ids[next_id++];
    // The last three positions of each sequence query (fewer for short ones), like a prefill chunk.
    for (int64_t p = std::max<int64_t>(0, lengths[s] - 3); p < lengths[s]; ++p) {
      query_seq.push_back(static_cast<int32_t>(s));
      positions.push_back(static_cast<int32_t>(p));
    }
  }
  const int64_t n = static_cast<int64_t>(positions.size());
  const auto qv = random_floats(static_cast<size_t>(n * heads * d), seed + 7);
  OwnedTensor q = f32_tensor({n, heads, d}, qv);
  OwnedTensor out(DType::F32, {n, heads, d});
  const ops::PagedKV paged{block_size, tables, max_blocks, query_seq};
  const float scale = 0.25f;
  ops::paged_attention(q.tensor, k_pool.tensor, v_pool.tensor, paged, positions, scale, window, out.tensor);

  const size_t row = static_cast<size_t>(kv_heads * d);
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = static_cast<size_t>(query_seq[static_cast<size_t>(i)]);
    const int64_t len = lengths[s];
    OwnedTensor k_cache(DType::F32, {len, kv_heads, d}), v_cache(DType::F32, {len, kv_heads, d});
    for (int64_t p = 0; p < len; ++p) {
      const int64_t slot = tables[s * max_blocks + static_cast<size_t>(p / block_size)] * block_size + p % block_size;
      std::memcpy(k_cache.ptr<float>() + p * static_cast<int64_t>(row), k_pool.ptr<float>() + slot * static_cast<int64_t>(row), row * 4);
      std::memcpy(v_cache.ptr<float>() + p * static_cast<int64_t>(row), v_pool.ptr<float>() + slot * static_cast<int64_t>(row), row * 4);
    }
    OwnedTensor q1(DType::F32, {1, heads, d}), want(DType::F32, {1, heads, d});
    std::memcpy(q1.tensor.data, q.ptr<float>() + i * heads * d, static_cast<size_t>(heads * d) * 4);
    const int32_t pos = positions[static_cast<size_t>(i)];
    ops::attention(q1.tensor, k_cache.tensor, v_cache.tensor, std::span<const int32_t>(&pos, 1), scale, window,
                   want.tensor);
    EXPECT_TRUE(bitwise_equal(want.ptr<float>(), out.ptr<float>() + i * heads * d, static_cast<size_t>(heads * d)))
        << "block_size " << block_size << " window " << window << " query " << i << " (position " << pos << ")";
  }
}

TEST(PagedAttention, EqualsContiguousAttentionBitForBit) {
  for (int64_t bs : {1, 4, 16, 48}) check_paged_equals_contiguous(bs, 0, static_cast<uint32_t>(bs));
}

TEST(PagedAttention, SlidingWindowEqualsContiguous) {
  for (int64_t bs : {4, 16}) check_paged_equals_contiguous(bs, 20, static_cast<uint32_t>(100 + bs));
}

TEST(PagedAttention, RejectsBadTables) {
  OwnedTensor pool(DType::F32, {16, 1, 8}), q(DType::F32, {1, 2, 8}), out(DType::F32, {1, 2, 8});
  std::vector<int32_t> tables = {0, 9}, seq = {0}, pos = {5};
  const float scale = 1.0f;
  // Block 9 is outside a pool of 4 blocks of 4.
  EXPECT_THROW(ops::paged_attention(q.tensor, pool.tensor, pool.tensor, ops::PagedKV{4, tables, 2, seq}, pos, scale, 0,
                                    out.tensor),
               Error);
  // Position 5 needs a second table entry; the table has one.
  EXPECT_THROW(ops::paged_attention(q.tensor, pool.tensor, pool.tensor,
                                    ops::PagedKV{4, std::span<const int32_t>(tables.data(), 1), 1, seq}, pos, scale, 0,
                                    out.tensor),
               Error);
  std::vector<int32_t> bad_seq = {3};
  EXPECT_THROW(ops::paged_attention(q.tensor, pool.tensor, pool.tensor, ops::PagedKV{4, tables, 2, bad_seq}, pos, scale,
                                    0, out.tensor),
               Error);
  tables[1] = 1;
  EXPECT_NO_THROW(ops::paged_attention(q.tensor, pool.tensor, pool.tensor, ops::PagedKV{4, tables, 2, seq}, pos, scale,
                                       0, out.tensor));
}

}  // namespace
}  // namespace corvid
