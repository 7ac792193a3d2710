// TurboQuant as a cache format (kv/kv_format.h turbo:kXvY): the names, the pools it makes
// (keys and values in their own dtypes, read back from the pool, per layer too), its
// bytes, the inverse rotation, and the attention layer's rotations: a rotated but
// unquantized cache gives the plain cache's logits, and TurboQuant's own codes track
// them as closely as their bits allow.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_config.h"
#include "corvid/kv/kv_format.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/ops/ops.h"
#include "fixture_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::random_floats;

TEST(TurboKvFormat, NamesParseAndPrintBack) {
  const KvFormat k4v3 = *kv_format_from_name("turbo:k4v3");
  EXPECT_EQ(k4v3, KvFormat(DType::T4G64, DType::T3G64, true, true));
  EXPECT_EQ(*kv_format_from_name("turbo:k8v2"), KvFormat(DType::A8G64, DType::T2G64, true, true));
  EXPECT_EQ(*kv_format_from_name("q4"), KvFormat(DType::A4G64));
  for (const std::string& name : kv_format_names()) {
    const std::optional<KvFormat> f = kv_format_from_name(name);
    ASSERT_TRUE(f.has_value()) << name;
    EXPECT_EQ(kv_format_name(*f), name);
  }
  EXPECT_EQ(kv_format_names().size(), 8u + 16u);
  for (const char* bad : {"turbo:k5v3", "turbo:k4", "turbo:k4v3x", "turbo:", "q5", "turbo:v3k4"})
    EXPECT_FALSE(kv_format_from_name(bad).has_value()) << bad;
  EXPECT_EQ(kv_format_name(KvFormat(DType::A4G64, DType::A4G64, true, false)), "q4 rotated");
}

// Bytes a position takes: keys and values each at their own width.
TEST(TurboKvFormat, BlocksTakeEachSidesBytes) {
  const std::vector<LayerState> spec = uniform_kv_spec(4, 2, 128);
  // turbo:k4v3: 36 + 28 bytes per 64 keys and 64 values (4.5 and 3.5 bits a value).
  EXPECT_EQ(BlockPool::bytes_per_block(spec, 16, *kv_format_from_name("turbo:k4v3")), 4 * 16 * 2 * 2 * (36 + 28));
  EXPECT_EQ(BlockPool::bytes_per_block(spec, 16, *kv_format_from_name("turbo:k8v3")), 4 * 16 * 2 * 2 * (68 + 28));
  const int64_t budget = int64_t{64} << 20;
  EXPECT_EQ(BlockPool::blocks_for_budget(spec, 16, budget, *kv_format_from_name("turbo:k4v3")),
            8 * BlockPool::blocks_for_budget(spec, 16, budget, DType::F32));  // 4 bits a value on average
}

// The pool holds what the format says, read back from its tensors; a per-layer rule can
// give one layer TurboQuant and the rest another format.
TEST(TurboKvFormat, PoolsHoldTheFormatsDtypes) {
  const std::vector<LayerState> spec = uniform_kv_spec(3, 2, 64);
  KvManagerConfig c;
  c.num_blocks = 4;
  c.format = *kv_format_from_name("turbo:k8v3");
  const KvManager kv(spec, c);
  for (int64_t l = 0; l < 3; ++l) {
    EXPECT_EQ(kv.keys(l).dtype, DType::A8G64);
    EXPECT_EQ(kv.values(l).dtype, DType::T3G64);
    EXPECT_TRUE(kv.format(l).rotate_keys && kv.format(l).rotate_values);
  }
  const auto rules = kv_layer_formats(R"({"rules": [{"layers": [1], "format": "turbo:k4v2"}]})", spec, "t.json");
  KVCache mixed(with_layer_formats(spec, rules), 8, Device::CPU, DType::A8G64);
  EXPECT_EQ(mixed.keys(0).dtype, DType::A8G64);
  EXPECT_FALSE(mixed.format(0).rotated());
  EXPECT_EQ(mixed.keys(1).dtype, DType::T4G64);
  EXPECT_EQ(mixed.values(1).dtype, DType::T2G64);
  EXPECT_TRUE(mixed.format(1).rotate_values);
  KvManagerConfig m = c;
  m.format = DType::F32;
  const KvManager grouped(with_layer_formats(spec, rules), m);
  ASSERT_EQ(grouped.groups().size(), 2u);  // one group per format
  EXPECT_EQ(grouped.groups()[1].name(), "full turbo:k4v2");
  // A head size the rotation cannot take is refused when the cache is made.
  EXPECT_THROW(KVCache(uniform_kv_spec(2, 2, 192), 8, Device::CPU, *kv_format_from_name("turbo:k8v3")), Error);
}

TEST(TurboKvFormat, UnrotateUndoesTheRotation) {
  const int64_t d = 128;
  const std::vector<float> x = random_floats(static_cast<size_t>(3 * 2 * d), 9, 2.0f);
  OwnedTensor t = f32_tensor({3, 2, d}, x);
  ops::hadamard_rotate(t.tensor);
  double moved = 0;
  for (size_t i = 0; i < x.size(); ++i) moved = std::max(moved, double{std::abs(t.ptr<float>()[i] - x[i])});
  EXPECT_GT(moved, 0.1);  // it did rotate
  ops::hadamard_unrotate(t.tensor);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(t.ptr<float>()[i], x[i], 2e-6f * 8) << i;
}

// The next-token logits of a session over `format` after `prompt`, a position at a time.
std::vector<float> logits_after(Runner& runner, const std::vector<int32_t>& prompt, const KvFormat& format) {
  Session s(runner, 64, format);
  std::vector<float> all;
  for (const int32_t t : prompt) {
    const Tensor& l = s.score(std::span<const int32_t>(&t, 1));
    all.insert(all.end(), l.ptr<float>(), l.ptr<float>() + l.numel());
  }
  return all;
}

double rms_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    s += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    n += double{b[i]} * b[i];
  }
  return std::sqrt(s / n);
}

// Rotating keys and values (and the output back) changes nothing but rounding: an F32
// cache stored rotated gives the plain cache's logits. So TurboQuant's rotations are
// right, and what its codes cost is their rounding alone: more bits, closer logits.
TEST(TurboKvFormat, RotatedCachesGiveThePlainLogits) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string());
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 3, 250, 7, 120, 64, 33, 8, 200, 11, 90, 4, 77};
  const std::vector<float> plain = logits_after(*m.runner, prompt, DType::F32);
  const std::vector<float> rotated = logits_after(*m.runner, prompt, KvFormat(DType::F32, DType::F32, true, true));
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_NEAR(rotated[i], plain[i], 1e-4f) << i;
  const double e88 = rms_diff(logits_after(*m.runner, prompt, *kv_format_from_name("turbo:k8v8")), plain);
  const double e44 = rms_diff(logits_after(*m.runner, prompt, *kv_format_from_name("turbo:k4v4")), plain);
  const double e22 = rms_diff(logits_after(*m.runner, prompt, *kv_format_from_name("turbo:k2v2")), plain);
  EXPECT_GT(e88, 0);
  EXPECT_LT(e88, e44);
  EXPECT_LT(e44, e22);
  EXPECT_LT(e88, 0.02);
}

}  // namespace
}  // namespace corvid
