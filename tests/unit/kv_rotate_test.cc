// --kv-rotate (ops::hadamard_rotate): the rotation is orthogonal (norms and q.k kept to
// rounding), it spreads one large channel over all of them, it refuses a head_dim that is
// not a power of 2; a model run with rotated queries and keys gives the unrotated run's
// logits to rounding over an F32 cache, and its batched engine steps over a rotated q4
// pool equal a session's alone.
#include <gtest/gtest.h>

#include <cmath>

#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/ops/ops.h"
#include "fixture_util.h"
#include "engine_runs.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::random_floats;

TEST(KvRotate, IsOrthogonalAndSpreadsALargeChannel) {
  const int64_t n = 3, heads = 2, d = 64;
  const auto qv = random_floats(static_cast<size_t>(n * heads * d), 1), kv = random_floats(qv.size(), 2);
  OwnedTensor q = f32_tensor({n, heads, d}, qv), k = f32_tensor({n, heads, d}, kv);
  auto dot = [&](const OwnedTensor& a, const OwnedTensor& b, int64_t v) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += static_cast<double>(a.ptr<float>()[v * d + i]) * b.ptr<float>()[v * d + i];
    return s;
  };
  std::vector<double> qk, kk;
  for (int64_t v = 0; v < n * heads; ++v) {
    qk.push_back(dot(q, k, v));
    kk.push_back(dot(k, k, v));
  }
  ops::hadamard_rotate(q.tensor);
  ops::hadamard_rotate(k.tensor);
  for (int64_t v = 0; v < n * heads; ++v) {
    EXPECT_NEAR(dot(q, k, v), qk[static_cast<size_t>(v)], 1e-4) << v;
    EXPECT_NEAR(dot(k, k, v), kk[static_cast<size_t>(v)], 1e-4 * kk[static_cast<size_t>(v)]) << v;
  }
  // One channel of 100 among small ones: after the rotation every channel holds 100 / 8.
  std::vector<float> spike(static_cast<size_t>(d), 0.0f);
  spike[5] = 100.0f;
  OwnedTensor s = f32_tensor({1, 1, d}, spike);
  ops::hadamard_rotate(s.tensor);
  for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(std::abs(s.ptr<float>()[i]), 12.5f, 1e-4f) << i;
  OwnedTensor odd(DType::F32, {1, 1, 96});
  EXPECT_THROW(ops::hadamard_rotate(odd.tensor), Error);
  // A cache that cannot hold rotated keys is refused when it is made, not at a request.
  const std::vector<LayerState> phi3_like = uniform_kv_spec(2, 4, 96);
  EXPECT_THROW(KVCache(phi3_like, 8, Device::CPU, KvFormat(DType::F32, DType::F32, true, false)), Error);
  KvManagerConfig c;
  c.format = KvFormat(DType::F32, DType::F32, true, false);
  EXPECT_THROW(KvManager(phi3_like, c), Error);
  EXPECT_NO_THROW(KVCache(uniform_kv_spec(2, 4, 64), 8, Device::CPU, KvFormat(DType::F32, DType::F32, true, false)));
}

TEST(KvRotate, RotatedRunsGiveTheSameLogitsAndStayBatchInvariant) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string());
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 3, 250, 7, 120, 64, 33};
  Session plain(*m.runner, 16, DType::F32), rotated(*m.runner, 16, KvFormat(DType::F32, DType::F32, true, false));
  const Tensor& a = plain.score(prompt);
  const std::vector<float> want(a.ptr<float>(), a.ptr<float>() + a.numel());
  const Tensor& b = rotated.score(prompt);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(b.ptr<float>()[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_LE(worst, 1e-5 * std::max(scale, 1.0));
  EXPECT_GT(worst, 0.0) << "the rotation ran";

  const auto prompts = fixtures::random_prompts(5, 9, 20, 400);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(fixtures::greedy(*m.runner, p, 12, KvFormat(DType::A4G64, DType::A4G64, true, false)));
  EngineConfig c;
  c.num_blocks = 128;
  c.block_size = 4;
  c.scheduler = {5, 24};
  c.kv_format = KvFormat(DType::A4G64, DType::A4G64, true, false);
  Engine engine(*m.runner, m.tokenizer.get(), c);
  EXPECT_TRUE(engine.kv().format(0).rotate_keys);
  const auto batched = fixtures::engine_greedy(engine, prompts, 12);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
  engine.shutdown();
}

}  // namespace
}  // namespace corvid
