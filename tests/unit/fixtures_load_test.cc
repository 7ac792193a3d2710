// Loads the transformers-made oracle fixtures (tests/fixtures/<name>/, see their
// README) through open_model: real safetensors files (f32, bf16, sharded) and
// config.json files written by transformers itself. Skipped where the fixtures
// are absent.
#include <gtest/gtest.h>

#include <filesystem>

#include "corvid/models/registry.h"
#include "corvid//formats/model_files.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(CORVID_SOURCE_DIR) / "tests" / "fixtures";

ModelFiles open_fixture(const std::string& name) {
  return open_model((kFixtures / name).string());
}

bool have(const std::string& name) { return fs::exists(kFixtures / name / "config.json"); }

TEST(FixtureFiles, LlamaFamily) {
  if (!have("llama") || !have("llama3_tied")) GTEST_SKIP() << "oracle fixtures not present";
  ModelFiles m = open_fixture("llama");
  EXPECT_EQ(m.config.architecture, "llama");
  EXPECT_EQ(m.config.num_key_value_heads, 2);
  EXPECT_FALSE(m.config.tie_word_embeddings);
  EXPECT_EQ(m.weights.get("lm_head.weight").shape_str(), "[512, 64]");
  EXPECT_FALSE(m.tokenizer_config_json.empty());

  m = open_fixture("llama3_tied");  // sharded, tied, llama3 rope
  EXPECT_TRUE(m.config.tie_word_embeddings);
  EXPECT_FALSE(m.weights.has("lm_head.weight"));
  EXPECT_EQ(m.weights.owners.size(), 2u);
  EXPECT_EQ(m.config.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(m.config.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(m.config.rope_theta, 5e5);
}

TEST(FixtureFiles, MistralAndQwen) {
  if (!have("mistral_swa") || !have("qwen2_yarn") || !have("qwen2_linear") || !have("qwen3_bf16"))
    GTEST_SKIP() << "oracle fixtures not present";
  EXPECT_EQ(open_fixture("mistral_swa").config.sliding_window, 16);

  ModelFiles m = open_fixture("qwen2_yarn");
  EXPECT_TRUE(m.config.attention_bias);
  EXPECT_EQ(m.config.vocab_size, 400);
  EXPECT_EQ(m.config.rope_scaling.type, RopeScaling::Type::Yarn);  // old key "type"
  EXPECT_DOUBLE_EQ(m.config.rope_scaling.factor, 4.0);
  EXPECT_FALSE(m.config.sliding_window);

  m = open_fixture("qwen2_linear");
  EXPECT_EQ(m.config.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_DOUBLE_EQ(m.config.rope_theta, 1e6);

  m = open_fixture("qwen3_bf16");  // rope_parameters and "dtype", as transformers 5 writes them
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.config.head_dim, 32);
  EXPECT_DOUBLE_EQ(m.config.rope_theta, 1e6);
  EXPECT_EQ(m.config.torch_dtype, "bfloat16");
  EXPECT_EQ(m.weights.get("model.layers.1.self_attn.q_norm.weight").dtype, DType::BF16);
}

}  // namespace
}  // namespace corvid
