// Model-level behaviour beyond the oracle fixtures: GGUF-style RoPE frequency
// factors, and batch invariance (prefill vs one-token decode).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "corvid/models/registry.h"
#include "corvid/core/buffer.h"
#include "corvid/core/error.h"
#include "corvid/formats/model_files.h"
#include "corvid/engine/runner.h"
#include "corvid/models/rope_scaling.h"
#include "model_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const char* name) { return fs::path(CORVID_SOURCE_DIR) / "tests" / "fixtures" / name; }

OwnedTensor run(Runner& model, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> positions(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int32_t>(i);
  KVCache kv(model.model().state_spec(), static_cast<int64_t>(tokens.size()));
  OwnedTensor logits(DType::F32, {static_cast<int64_t>(tokens.size()), model.config().vocab_size});
  model.forward(tokens, positions, kv, logits.tensor, true);
  return logits;
}

TEST(LlamaModel, RopeFreqFactorsEqualLlama3Scaling) {
  // A Llama 3.x GGUF stores llama3 scaling as per-frequency divisors; applying them to
  // unscaled frequencies must give the same model as the rope_scaling config.
  ModelFiles files = open_model(fixture("llama3_tied").string());
  ASSERT_EQ(files.config.rope_scaling.type, RopeScaling::Type::Llama3);
  ModelConfig plain = files.config;
  plain.rope_scaling = RopeScaling{};
  const auto scaled = make_rope_params(files.config).inv_freq;
  const auto base = make_rope_params(plain).inv_freq;
  std::vector<float> divisors(base.size());
  bool any_scaled = false;
  for (size_t i = 0; i < base.size(); ++i) {
    divisors[i] = base[i] / scaled[i];
    any_scaled |= divisors[i] > 1.01f;
  }
  ASSERT_TRUE(any_scaled);
  WeightSet with_factors = files.weights;
  with_factors.tensors["rope_freqs.weight"] = Tensor(DType::F32, {static_cast<int64_t>(divisors.size())}, divisors.data());

  BoundModel reference(files), factored(plain, files, with_factors), unscaled(plain, files, files.weights);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % static_cast<int>(plain.vocab_size));
  OwnedTensor a = run(*reference, tokens), b = run(*factored, tokens), c = run(*unscaled, tokens);
  double worst_ab = 0, worst_ac = 0;
  for (int64_t i = 0; i < a.tensor.numel(); ++i) {
    worst_ab = std::max(worst_ab, static_cast<double>(std::abs(a.ptr<float>()[i] - b.ptr<float>()[i])));
    worst_ac = std::max(worst_ac, static_cast<double>(std::abs(a.ptr<float>()[i] - c.ptr<float>()[i])));
  }
  EXPECT_LT(worst_ab, 1e-4);
  EXPECT_GT(worst_ac, 1e-2);  // the scaling matters at these positions, so the test can fail
}

TEST(LlamaModel, PrefillEqualsTokenByTokenDecode) {
  // Batch invariance: a token's logits must not depend on how the sequence was chunked.
  ModelFiles files = open_model(fixture("qwen3_bf16").string());
  BoundModel bound(files);
  Runner& model = *bound;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back((i * 53 + 7) % static_cast<int>(files.config.vocab_size));
  OwnedTensor all = run(model, tokens);
  KVCache kv(bound.spec(), static_cast<int64_t>(tokens.size()));
  OwnedTensor one(DType::F32, {1, files.config.vocab_size});
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t pos = static_cast<int32_t>(i);
    model.forward(std::span<const int32_t>(&tokens[i], 1), std::span<const int32_t>(&pos, 1), kv, one.tensor, false);
    for (int64_t v = 0; v < files.config.vocab_size; ++v)
      ASSERT_EQ(one.ptr<float>()[v], all.tensor.row<float>(static_cast<int64_t>(i))[v]) << "position " << i;
  }
}

}  // namespace
}  // namespace corvid

namespace corvid {
namespace {

// longrope: which factors apply is fixed by the model's context (rope_scaling.h), and the
// frequencies and attention factor follow transformers' _compute_longrope_parameters.
TEST(RopeScaling, LongropePicksFactorsByContextAndScales) {
  ModelConfig c;
  c.head_dim = 8;
  c.rotary_dim = 4;
  c.rope_theta = 10000.0;
  c.rope_scaling.type = RopeScaling::Type::LongRope;
  c.rope_scaling.short_factor = {1.0, 2.0};
  c.rope_scaling.long_factor = {3.0, 5.0};
  c.rope_scaling.factor = 0;  // absent from the config: max / original context
  c.rope_scaling.original_max_position_embeddings = 4;
  c.max_position_embeddings = 256;  // past the original: long factors, factor 64
  ops::RopeParams p = make_rope_params(c);
  ASSERT_EQ(p.inv_freq.size(), 2u);
  EXPECT_FLOAT_EQ(p.inv_freq[0], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(p.inv_freq[1], 1.0f / (5.0f * std::pow(10000.0f, 0.5f)));
  EXPECT_FLOAT_EQ(p.attention_factor, 2.0f);  // sqrt(1 + ln 64 / ln 4)
  c.max_position_embeddings = 4;  // the original context: short factors, no scaling
  p = make_rope_params(c);
  EXPECT_FLOAT_EQ(p.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(p.inv_freq[1], 1.0f / (2.0f * std::pow(10000.0f, 0.5f)));
  EXPECT_FLOAT_EQ(p.attention_factor, 1.0f);
  c.rope_scaling.attention_factor = 1.25;  // the config's own
  EXPECT_FLOAT_EQ(make_rope_params(c).attention_factor, 1.25f);
  c.rope_scaling.short_factor = {1.0};
  EXPECT_THROW(make_rope_params(c), Error);  // 1 factor for 2 frequencies
}

}  // namespace
}  // namespace corvid
