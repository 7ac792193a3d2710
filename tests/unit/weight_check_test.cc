#include <gtest/gtest.h>

#include "corvid/core/error.h"
#include "corvid/formats/weight_check.h"

namespace corvid {
namespace {

// Shapes only: check_weights never reads data.
ModelConfig qwen3_like() {
  ModelConfig c;
  c.architecture = "qwen3";
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 6;  // != hidden / heads, as in Qwen3
  c.qk_norm = true;
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  return c;
}

WeightSet weights_for(const ModelConfig& c) {
  WeightSet w;
  w.source = "ckpt";
  auto add = [&](const std::string& n, std::initializer_list<int64_t> s) {
    w.tensors[n] = Tensor(DType::BF16, s, nullptr);
  };
  add("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
  add("model.norm.weight", {c.hidden_size});
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {c.hidden_size});
    add(p + "post_attention_layernorm.weight", {c.hidden_size});
    add(p + "self_attn.q_proj.weight", {q, c.hidden_size});
    add(p + "self_attn.k_proj.weight", {kv, c.hidden_size});
    add(p + "self_attn.v_proj.weight", {kv, c.hidden_size});
    add(p + "self_attn.o_proj.weight", {c.hidden_size, q});
    add(p + "self_attn.q_proj.bias", {q});
    add(p + "self_attn.k_proj.bias", {kv});
    add(p + "self_attn.v_proj.bias", {kv});
    add(p + "self_attn.q_norm.weight", {c.head_dim});
    add(p + "self_attn.k_norm.weight", {c.head_dim});
    add(p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size});
    add(p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size});
    add(p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size});
  }
  return w;
}

void expect_message(const ModelConfig& c, const WeightSet& w, const std::string& expected) {
  try {
    check_weights(c, w);
    ADD_FAILURE() << "no error; expected " << expected;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

TEST(WeightCheck, AcceptsMatchingWeights) {
  ModelConfig c = qwen3_like();
  WeightSet w = weights_for(c);
  EXPECT_NO_THROW(check_weights(c, w));
  w.tensors["something.extra"] = Tensor(DType::F32, {3}, nullptr);  // ignored
  EXPECT_NO_THROW(check_weights(c, w));
}

TEST(WeightCheck, ReportsMissingAndMisshapen) {
  ModelConfig c = qwen3_like();
  WeightSet w = weights_for(c);
  w.tensors.erase("model.layers.1.self_attn.k_norm.weight");
  expect_message(c, w, "ckpt: missing tensor model.layers.1.self_attn.k_norm.weight");

  w = weights_for(c);
  w.tensors["model.layers.0.self_attn.k_proj.weight"] = Tensor(DType::BF16, {24, 8}, nullptr);
  expect_message(c, w,
                 "ckpt: tensor model.layers.0.self_attn.k_proj.weight has shape [24, 8], the config implies [12, 8]");

  w = weights_for(c);
  c.tie_word_embeddings = false;
  expect_message(c, w, "ckpt: missing tensor lm_head.weight");
  w.tensors["lm_head.weight"] = Tensor(DType::BF16, {10, 8}, nullptr);
  EXPECT_NO_THROW(check_weights(c, w));

  w.tensors["model.layers.0.self_attn.o_proj.bias"] = Tensor(DType::BF16, {7}, nullptr);  // optional, but checked
  expect_message(c, w, "ckpt: tensor model.layers.0.self_attn.o_proj.bias has shape [7], the config implies [8]");

  c = qwen3_like();
  c.mlp_bias = true;
  expect_message(c, weights_for(c), "ckpt: missing tensor model.layers.0.mlp.gate_proj.bias");
  c = qwen3_like();
  c.vocab_size = 11;
  expect_message(c, weights_for(qwen3_like()),
                 "ckpt: tensor model.embed_tokens.weight has shape [10, 8], the config implies [11, 8]");
}

}  // namespace
}  // namespace corvid
