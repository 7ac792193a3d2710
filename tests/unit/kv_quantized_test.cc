// Coded KV caches (affine q8 / q4, ops/kv_affine.h; fp8, ops/kv_fp8.h; TurboQuant's
// codes, ops/kv_turbo.h, and the turbo:kXvY formats that pair them) on the CPU:
// store_kv writes the format's codes, attention over the codes equals attention over
// their decoded values bit for bit (contiguous and paged), a pool of a byte budget holds
// as many more tokens as the format is smaller, and the engine's batched steps over a quantized pool give what a
// session alone gives over a quantized cache (batch invariance, preemption included).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_store.h"
#include "corvid/ops/kv_codec.h"
#include "corvid/ops/ops.h"
#include "fixture_util.h"
#include "engine_runs.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::bitwise_equal;
using testing::f32_tensor;
using testing::random_floats;

constexpr DType kFormats[] = {DType::A8G64, DType::A4G64, DType::A8G32, DType::A4G32,
                              DType::F8G64, DType::T4G64, DType::T3G64, DType::T2G64};
// What the engine tests run: each coded dtype as a plain format, and TurboQuant's pairs.
const std::vector<KvFormat> kEngineFormats = {
    DType::A8G64, DType::A4G64, DType::A8G32, DType::A4G32, DType::F8G64,
    *kv_format_from_name("turbo:k8v3"), *kv_format_from_name("turbo:k4v3"), *kv_format_from_name("turbo:k3v2")};

// Rows [0, rows) of a coded cache, decoded into an F32 cache of the same shape.
OwnedTensor dequantized(const Tensor& cache) {
  OwnedTensor out(DType::F32, {cache.dim(0), cache.dim(1), cache.dim(2)});
  ops::kv_codec::decode(cache.dtype, static_cast<const uint8_t*>(cache.data), cache.numel(), out.ptr<float>());
  return out;
}

TEST(QuantizedKv, StoreKvWritesTheFormatsCodes) {
  const int64_t n = 5, kv_heads = 2, d = 64;
  const auto kv = random_floats(static_cast<size_t>(2 * n * kv_heads * d), 3, 2.0f);
  OwnedTensor k = f32_tensor({n, kv_heads, d}, std::vector<float>(kv.begin(), kv.begin() + n * kv_heads * d));
  OwnedTensor v = f32_tensor({n, kv_heads, d}, std::vector<float>(kv.begin() + n * kv_heads * d, kv.end()));
  const std::vector<int32_t> rows = {7, 0, 3, -1, 5};  // -1: skipped
  for (const DType t : kFormats) {
    OwnedTensor kc(t, {8, kv_heads, d}), vc(t, {8, kv_heads, d});
    std::memset(kc.tensor.data, 0, kc.tensor.nbytes());
    ops::store_kv(k.tensor, v.tensor, rows, kc.tensor, vc.tensor);
    const size_t row_bytes = bytes_for(t, kv_heads * d);
    std::vector<uint8_t> want(row_bytes);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < 0) continue;
      ops::kv_codec::encode(t, k.ptr<float>() + static_cast<int64_t>(i) * kv_heads * d, kv_heads * d, want.data());
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(kc.tensor.data) + static_cast<size_t>(rows[i]) * row_bytes,
                            want.data(), row_bytes),
                0)
          << dtype_name(t) << " row " << rows[i];
    }
    const std::vector<uint8_t> zeros(row_bytes, 0);
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(kc.tensor.data) + 1 * row_bytes, zeros.data(), row_bytes), 0)
        << "row 1 was never written";
  }
}

// Queries over every format: contiguous attention and paged attention (a shuffled block
// table) over the codes, against attention over the dequantized values.
TEST(QuantizedKv, AttentionOverCodesEqualsAttentionOverTheirValues) {
  const int64_t heads = 4, kv_heads = 2, d = 64, len = 150, block = 16;
  const auto kv = random_floats(static_cast<size_t>(2 * len * kv_heads * d), 21, 1.5f);
  OwnedTensor k = f32_tensor({len, kv_heads, d}, std::vector<float>(kv.begin(), kv.begin() + len * kv_heads * d));
  OwnedTensor v = f32_tensor({len, kv_heads, d}, std::vector<float>(kv.begin() + len * kv_heads * d, kv.end()));
  std::vector<int32_t> positions = {0, 1, 63, 64, 100, 149};
  const int64_t n = static_cast<int64_t>(positions.size());
  OwnedTensor q = f32_tensor({n, heads, d}, random_floats(static_cast<size_t>(n * heads * d), 22));
  // Every format for keys and values alike, and TurboQuant's pairs of two widths.
  std::vector<std::pair<DType, DType>> pairs;
  for (const DType t : kFormats) pairs.emplace_back(t, t);
  pairs.emplace_back(DType::A8G64, DType::T3G64);
  pairs.emplace_back(DType::T4G64, DType::T2G64);
  for (const auto& [t, tv] : pairs) {
    // Contiguous: row p holds position p.
    std::vector<int32_t> rows(static_cast<size_t>(len));
    std::iota(rows.begin(), rows.end(), 0);
    OwnedTensor kc(t, {len, kv_heads, d}), vc(tv, {len, kv_heads, d});
    ops::store_kv(k.tensor, v.tensor, rows, kc.tensor, vc.tensor);
    OwnedTensor kf = dequantized(kc.tensor), vf = dequantized(vc.tensor);
    for (const int64_t window : {int64_t{0}, int64_t{40}}) {
      OwnedTensor got(DType::F32, {n, heads, d}), want(DType::F32, {n, heads, d});
      ops::attention(q.tensor, kc.tensor, vc.tensor, positions, 0.125f, window, got.tensor);
      ops::attention(q.tensor, kf.tensor, vf.tensor, positions, 0.125f, window, want.tensor);
      EXPECT_TRUE(bitwise_equal(got.ptr<float>(), want.ptr<float>(), static_cast<size_t>(n * heads * d)))
          << dtype_name(t) << "/" << dtype_name(tv) << " window " << window;
    }
    // Paged: the same positions scattered over shuffled blocks of a larger pool.
    const int64_t blocks = (len + block - 1) / block, pool_blocks = blocks + 5;
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
    std::copy_n(ids.begin(), blocks, table.begin());
    std::vector<int32_t> slots(static_cast<size_t>(len));
    for (int64_t p = 0; p < len; ++p)
      slots[static_cast<size_t>(p)] = table[static_cast<size_t>(p / block)] * static_cast<int32_t>(block) +
                                      static_cast<int32_t>(p % block);
    OwnedTensor kp(t, {pool_blocks * block, kv_heads, d}), vp(tv, {pool_blocks * block, kv_heads, d});
    ops::store_kv(k.tensor, v.tensor, slots, kp.tensor, vp.tensor);
    const std::vector<int32_t> query_seq(static_cast<size_t>(n), 0);
    const ops::PagedKV paged{block, table, blocks, query_seq};
    OwnedTensor got(DType::F32, {n, heads, d}), want(DType::F32, {n, heads, d});
    ops::paged_attention(q.tensor, kp.tensor, vp.tensor, paged, positions, 0.125f, 0, got.tensor);
    ops::attention(q.tensor, kf.tensor, vf.tensor, positions, 0.125f, 0, want.tensor);
    EXPECT_TRUE(bitwise_equal(got.ptr<float>(), want.ptr<float>(), static_cast<size_t>(n * heads * d)))
        << dtype_name(t) << "/" << dtype_name(tv) << " paged";
  }
}

TEST(QuantizedKv, RefusesWhatTheFormatsCannotHold) {
  OwnedTensor q(DType::F32, {1, 2, 16}), out(DType::F32, {1, 2, 16});
  OwnedTensor kc(DType::A8G32, {4, 1, 32}), vc(DType::A8G32, {4, 1, 32});
  const std::vector<int32_t> pos = {0};
  EXPECT_THROW(ops::attention(q.tensor, kc.tensor, vc.tensor, pos, 1.0f, 0, out.tensor), Error);  // head_dim 16 != 32
  EXPECT_TRUE(ops::kv_cache_dtype_supported(DType::A8G64, Device::CUDA));
  EXPECT_TRUE(ops::kv_cache_dtype_supported(DType::A4G32, Device::CPU));
  const std::vector<LayerState> spec = uniform_kv_spec(2, 1, 48);  // head_dim 48: no whole groups of 64
  EXPECT_THROW(KVCache(spec, 8, Device::CPU, DType::A8G64), Error);
  EXPECT_THROW(KVCache(spec, 8, Device::CPU, DType::F8G64), Error);
  EXPECT_TRUE(ops::kv_cache_dtype_supported(DType::F8G64, Device::CUDA));
  EXPECT_FALSE(ops::kv_cache_dtype_supported(DType::BF16, Device::CPU));
}

// A byte budget holds 4 / (68 / 64) = 3.76x (q8) and 4 / (36 / 64) = 7.1x (q4) the F32 tokens.
TEST(QuantizedKv, PoolsHoldMoreTokensInTheSameBytes) {
  const std::vector<LayerState> spec = uniform_kv_spec(4, 2, 64);
  const int64_t budget = int64_t{64} << 20;
  const int64_t f32 = BlockPool::blocks_for_budget(spec, 16, budget, DType::F32);
  EXPECT_EQ(BlockPool::bytes_per_block(spec, 16, DType::A8G64), 4 * 2 * 2 * 16 * 68);
  EXPECT_EQ(BlockPool::blocks_for_budget(spec, 16, budget, DType::A8G64), budget / (4 * 2 * 2 * 16 * 68));
  EXPECT_EQ(BlockPool::blocks_for_budget(spec, 16, budget, DType::A4G64), budget / (4 * 2 * 2 * 16 * 36));
  EXPECT_GT(BlockPool::blocks_for_budget(spec, 16, budget, DType::A4G64), 7 * f32);
  EXPECT_EQ(BlockPool::bytes_per_block(spec, 16, DType::F8G64), 4 * 2 * 2 * 16 * 68);  // 64 codes + an f32 scale
}

// A store over given tensors, to compare signatures (what a recorded step is checked against).
class FixedStore final : public KvStore {
 public:
  FixedStore(Tensor k, Tensor v) : k_(k), v_(v) {}
  const Tensor& keys(int64_t) const override { return k_; }
  const Tensor& values(int64_t) const override { return v_; }
  int64_t num_layers() const override { return 1; }
  Device device() const override { return Device::CPU; }
  bool paged() const override { return true; }

 private:
  Tensor k_, v_;
};

// A pool of another format at the freed one's addresses (fp8 and q8 rows take the same
// bytes) must not replay the old format's recorded kernels.
TEST(QuantizedKv, StoreSignatureCarriesTheFormat) {
  OwnedTensor bytes(DType::F8G64, {16, 2, 64});
  auto store = [&](DType t) {
    return FixedStore(Tensor(t, {16, 2, 64}, bytes.tensor.data), Tensor(t, {16, 2, 64}, bytes.tensor.data));
  };
  EXPECT_EQ(store(DType::F8G64).signature(), store(DType::F8G64).signature());
  EXPECT_NE(store(DType::F8G64).signature(), store(DType::A8G64).signature());
  EXPECT_NE(store(DType::F16).signature(), store(DType::BF16).signature());
}

// Batched engine steps over a quantized pool give a session's greedy tokens over a
// quantized cache of the same format, alone; with a pool small enough to preempt too.
class QuantizedKvEngine : public ::testing::TestWithParam<KvFormat> {};

TEST_P(QuantizedKvEngine, BatchedGreedyEqualsSessionAlone) {
  const KvFormat t = GetParam();
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string());
  const auto prompts = fixtures::random_prompts(6, 17, 25, static_cast<int32_t>(m.model->config().vocab_size));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(fixtures::greedy(*m.runner, p, 16, t));
  fixtures::expect_batched_equals_alone(*m.runner, m.tokenizer.get(), prompts, alone, 16, t);
}

// Appending k tokens in one step (a prefill chunk, speculative verification) gives the
// same logits, bit for bit, as k one-token steps over the same quantized cache: every
// query reads the keys and values of its own step back from the codes, as later steps do.
TEST_P(QuantizedKvEngine, MultiTokenAppendEqualsOneTokenSteps) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string());
  fixtures::expect_append_equals_one_token_steps(*m.runner, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedKvEngine, ::testing::ValuesIn(kEngineFormats),
                         [](const ::testing::TestParamInfo<KvFormat>& p) {
                           return fixtures::test_name(kv_format_name(p.param));
                         });

}  // namespace
}  // namespace corvid
