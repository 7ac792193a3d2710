#include <gtest/gtest.h>

#include <filesystem>

#include "corvid/models/registry.h"
#include "corvid//core/error.h"
#include "corvid/formats/gguf_model.h"
#include "gguf_builder.h"

namespace corvid {
namespace {

using testing::Bytes;
using testing::GgufBuilder;

const std::string kStories = std::string(CORVID_SOURCE_DIR) + "/tests/data/stories260K.gguf";

std::shared_ptr<GgufFile> parse(const Bytes& b) {
  auto copy = std::make_shared<Bytes>(b);
  return GgufFile::parse(copy, copy->data(), copy->size(), "mem.gguf");
}

// A qwen3-shaped file: 1 layer, dim 64, 4 heads of 32 (key_length) / 2 kv heads.
GgufBuilder qwen3_file() {
  GgufBuilder g;
  g.str("general.architecture", "qwen3").u32("qwen3.block_count", 1).u32("qwen3.embedding_length", 64);
  g.u32("qwen3.feed_forward_length", 128).u32("qwen3.attention.head_count", 4);
  g.u32("qwen3.attention.head_count_kv", 2).u32("qwen3.attention.key_length", 32);
  g.f32("qwen3.rope.freq_base", 1000000.0f).u32("qwen3.context_length", 40960);
  g.f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  g.str_array("tokenizer.ggml.tokens", {"a", "b", "c", "d"});
  g.u32("tokenizer.ggml.bos_token_id", 0).u32("tokenizer.ggml.eos_token_id", 3);
  g.u32("tokenizer.ggml.eot_token_id", 2);
  g.tensor("token_embd.weight", {64, 4}, 0, 64 * 4 * 4);
  g.tensor("blk.0.attn_q.weight", {64, 128}, 0, 64 * 128 * 4);
  g.tensor("blk.0.attn_q_norm.weight", {32}, 0, 32 * 4);
  g.tensor("blk.0.attn_k_norm.weight", {32}, 0, 32 * 4);
  return g;
}

TEST(GgufModel, Stories260KConfig) {
  auto f = GgufFile::open(kStories);
  ModelConfig c = read_gguf_config(*f);
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);  // from token_embd.weight (no llama.vocab_size key)
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-9);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.rope_interleaved);
  EXPECT_FALSE(c.tie_word_embeddings);  // this file stores output.weight
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
}

TEST(GgufModel, Stories260KWeights) {
  WeightSet w = gguf_weight_set(GgufFile::open(kStories));
  EXPECT_EQ(w.tensors.size(), 48u);
  EXPECT_EQ(w.source, kStories);
  EXPECT_EQ(w.owners.size(), 1u);
  EXPECT_EQ(w.get("model.embed_tokens.weight").shape_str(), "[512, 64]");
  EXPECT_EQ(w.get("lm_head.weight").shape_str(), "[512, 64]");
  EXPECT_EQ(w.get("model.norm.weight").shape_str(), "[64]");
  for (int l = 0; l < 5; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    EXPECT_EQ(w.get(p + "self_attn.q_proj.weight").shape_str(), "[64, 64]");
    EXPECT_EQ(w.get(p + "self_attn.k_proj.weight").shape_str(), "[32, 64]");
    EXPECT_EQ(w.get(p + "self_attn.v_proj.weight").shape_str(), "[32, 64]");
    EXPECT_EQ(w.get(p + "self_attn.o_proj.weight").shape_str(), "[64, 64]");
    EXPECT_EQ(w.get(p + "mlp.gate_proj.weight").shape_str(), "[172, 64]");
    EXPECT_EQ(w.get(p + "mlp.up_proj.weight").shape_str(), "[172, 64]");
    EXPECT_EQ(w.get(p + "mlp.down_proj.weight").shape_str(), "[64, 172]");
    EXPECT_TRUE(w.has(p + "input_layernorm.weight"));
    EXPECT_TRUE(w.has(p + "post_attention_layernorm.weight"));
  }
  try {
    w.get("model.layers.9.mlp.up_proj.weight");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), kStories + ": missing tensor model.layers.9.mlp.up_proj.weight");
  }
}

TEST(GgufModel, SmolLM2ConfigWhenPresent) {
  std::string path = std::string(CORVID_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* env = std::getenv("CORVID_SMOLLM2_GGUF")) path = env;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not present";
  auto f = GgufFile::open(path);
  ModelConfig c = read_gguf_config(*f);
  EXPECT_EQ(c.num_hidden_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_attention_heads, 9);
  EXPECT_EQ(c.num_key_value_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 100000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.rope_interleaved);
  WeightSet w = gguf_weight_set(f);
  EXPECT_EQ(w.get("model.embed_tokens.weight").dtype, DType::Q8_0);
  EXPECT_EQ(w.get("model.layers.29.mlp.down_proj.weight").dtype, DType::Q4_1);
  EXPECT_FALSE(w.has("lm_head.weight"));
}

TEST(GgufModel, Qwen3FromMetadata) {
  GgufBuilder g = qwen3_file();
  auto f = parse(g.build());
  ModelConfig c = read_gguf_config(*f);
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_EQ(c.head_dim, 32);  // key_length, not 64/4
  EXPECT_EQ(c.rotary_dim, 32);
  EXPECT_EQ(c.vocab_size, 4);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.rope_interleaved);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{3, 2}));  // eos then end-of-turn
  WeightSet w = gguf_weight_set(f);
  EXPECT_TRUE(w.has("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(w.has("model.layers.0.self_attn.k_norm.weight"));
  EXPECT_EQ(w.get("model.layers.0.self_attn.q_proj.weight").shape_str(), "[128, 64]");
}

TEST(GgufModel, Qwen2BiasAndRopeScaling) {
  GgufBuilder g;
  g.str("general.architecture", "qwen2").u32("qwen2.block_count", 1).u32("qwen2.embedding_length", 64);
  g.u32("qwen2.feed_forward_length", 128).u32("qwen2.attention.head_count", 4).u32("qwen2.vocab_size", 10);
  g.str("qwen2.rope.scaling.type", "yarn").f32("qwen2.rope.scaling.factor", 4.0f);
  g.u32("qwen2.rope.scaling.original_context_length", 32768);
  g.tensor("blk.0.attn_q.bias", {64}, 0, 256).tensor("output.weight", {64, 10}, 0, 2560);
  g.tensor("blk.0.something_new.weight", {4}, 0, 16);
  auto f = parse(g.build());
  ModelConfig c = read_gguf_config(*f);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.num_key_value_heads, 4);  // head_count_kv absent
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Yarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.max_position_embeddings, 4 * 32768);  // so max / original is the stored factor
  WeightSet w = gguf_weight_set(f);
  EXPECT_TRUE(w.has("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(w.has("blk.0.something_new.weight"));
}

TEST(GgufModel, VocabFromTokenListAsLastResort) {
  GgufBuilder g;
  g.str("general.architecture", "llama").u32("llama.block_count", 1).u32("llama.embedding_length", 64);
  g.u32("llama.feed_forward_length", 128).u32("llama.attention.head_count", 4);
  g.str_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  EXPECT_EQ(read_gguf_config(*parse(g.build())).vocab_size, 3);
  GgufBuilder none;
  none.str("general.architecture", "llama").u32("llama.block_count", 1).u32("llama.embedding_length", 64);
  none.u32("llama.feed_forward_length", 128).u32("llama.attention.head_count", 4);
  EXPECT_THROW(read_gguf_config(*parse(none.build())), Error);
}

TEST(GgufModel, NameMapping) {
  EXPECT_EQ(hf_name_from_gguf("blk.12.attn_output.weight"), "model.layers.12.self_attn.o_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.0.ffn_norm.weight"), "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.3.attn_v.bias"), "model.layers.3.self_attn.v_proj.bias");
  EXPECT_EQ(hf_name_from_gguf("blk.x.attn_q.weight"), "blk.x.attn_q.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.1"), "blk.1");
  EXPECT_EQ(hf_name_from_gguf("blk."), "blk.");
  EXPECT_EQ(hf_name_from_gguf("output.weight"), "lm_head.weight");
}

void expect_error(const Bytes& b, const std::string& needle) {
  auto f = parse(b);
  try {
    read_gguf_config(*f);
    ADD_FAILURE() << "expected: " << needle;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("mem.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(GgufModel, Errors) {
  GgufBuilder g;
  g.str("general.architecture", "gpt2");
  expect_error(g.build(), "unsupported GGUF architecture 'gpt2' (supported: llama, qwen2, qwen3, ");
  expect_error(GgufBuilder().build(), "missing metadata general.architecture");
  g = GgufBuilder();
  g.str("general.architecture", "llama").u32("llama.block_count", 1);
  expect_error(g.build(), "missing metadata llama.embedding_length");
  g = qwen3_file();
  g.u32("qwen3.attention.head_count_kv", 3);
  EXPECT_THROW(parse(g.build()), Error);  // duplicate key
  GgufBuilder h;
  h.str("general.architecture", "llama").u32("llama.block_count", 1).u32("llama.embedding_length", 64);
  h.u32("llama.feed_forward_length", 128).u32("llama.attention.head_count", 4);
  h.u32("llama.attention.head_count_kv", 3).u32("llama.vocab_size", 4);
  expect_error(h.build(), "head_count 4 is not a multiple of head_count_kv 3");
  GgufBuilder k;
  k.str("general.architecture", "llama").u32("llama.block_count", 0);
  expect_error(k.build(), "llama.block_count must be positive");
  GgufBuilder r;
  r.str("general.architecture", "llama").u32("llama.block_count", 1).u32("llama.embedding_length", 64);
  r.u32("llama.feed_forward_length", 128).u32("llama.attention.head_count", 4).u32("llama.vocab_size", 4);
  r.tensor("rope_freqs.weight", {8}, 0, 32);
  EXPECT_NO_THROW(read_gguf_config(*parse(r.build())));  // the model applies the factors
  EXPECT_TRUE(gguf_weight_set(parse(r.build())).has("rope_freqs.weight"));  // no HF name: kept as is
  GgufBuilder s;
  s.str("general.architecture", "llama").u32("llama.block_count", 1).u32("llama.embedding_length", 64);
  s.u32("llama.feed_forward_length", 128).u32("llama.attention.head_count", 4).u32("llama.vocab_size", 4);
  s.str("llama.rope.scaling.type", "longrope");
  expect_error(s.build(), "unsupported rope.scaling.type 'longrope'");
}

}  // namespace
}  // namespace corvid
