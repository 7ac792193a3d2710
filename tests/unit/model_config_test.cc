#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corvid/models/registry.h"
#include "corvid//core/error.h"
#include "corvid/formats/model_config.h"

namespace corvid {
namespace {

using json = nlohmann::json;

json base(const std::string& model_type) {
  return {{"model_type", model_type}, {"vocab_size", 1000},       {"hidden_size", 256},
          {"intermediate_size", 512}, {"num_hidden_layers", 4},   {"num_attention_heads", 8}};
}

void expect_error(const json& j, const std::string& needle) {
  try {
    read_model_config(j, "m/config.json");
    ADD_FAILURE() << "parsed; expected error containing: " << needle;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("m/config.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(ModelConfig, LlamaDefaults) {
  ModelConfig c = read_model_config(base("llama"), "m/config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_key_value_heads, 8);  // defaults to num_attention_heads
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rotary_dim, 32);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.rope_interleaved);
  EXPECT_FALSE(c.sliding_window);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.kv_bytes_per_token(2), 2 * 4 * 8 * 32 * 2);
}

TEST(ModelConfig, Llama31Style) {
  // The fields of meta-llama/Llama-3.1-8B-Instruct's config.json.
  json j = {{"model_type", "llama"}, {"vocab_size", 128256}, {"hidden_size", 4096},
            {"intermediate_size", 14336}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
            {"num_key_value_heads", 8}, {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5},
            {"rope_theta", 500000.0}, {"bos_token_id", 128000}, {"eos_token_id", {128001, 128008, 128009}},
            {"torch_dtype", "bfloat16"}, {"tie_word_embeddings", false}, {"attention_bias", false},
            {"mlp_bias", false}, {"hidden_act", "silu"},
            {"rope_scaling", {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}}};
  ModelConfig c = read_model_config(j, "m/config.json");
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(c.torch_dtype, "bfloat16");

  j["rope_scaling"].erase("low_freq_factor");
  expect_error(j, "missing required field rope_scaling.low_freq_factor");
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = base("mistral");
  ModelConfig c = read_model_config(j, "m/config.json");
  EXPECT_EQ(c.num_key_value_heads, 8);  // MistralConfig default
  EXPECT_EQ(c.sliding_window, 4096);    // default when absent
  EXPECT_EQ(c.max_window_layers, 0);
  EXPECT_EQ(c.max_position_embeddings, 4096 * 32);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  j["sliding_window"] = nullptr;
  EXPECT_FALSE(read_model_config(j, "x").sliding_window);
  j["sliding_window"] = 2048;
  EXPECT_EQ(read_model_config(j, "x").sliding_window, 2048);
  j["head_dim"] = 128;  // Mistral-Nemo: head_dim != hidden / heads
  EXPECT_EQ(read_model_config(j, "x").head_dim, 128);
  j["head_dim"] = nullptr;
  EXPECT_EQ(read_model_config(j, "x").head_dim, 32);
  j["num_key_value_heads"] = nullptr;  // explicit null: same as attention heads
  EXPECT_EQ(read_model_config(j, "x").num_key_value_heads, 8);
  j["num_key_value_heads"] = 2;
  EXPECT_EQ(read_model_config(j, "x").num_key_value_heads, 2);
  j["sliding_window"] = 0;
  expect_error(j, "sliding_window must be positive");
}

TEST(ModelConfig, Qwen2) {
  // Qwen2.5-0.5B-Instruct's fields.
  json j = {{"model_type", "qwen2"}, {"vocab_size", 151936}, {"hidden_size", 896},
            {"intermediate_size", 4864}, {"num_hidden_layers", 24}, {"num_attention_heads", 14},
            {"num_key_value_heads", 2}, {"max_position_embeddings", 32768}, {"rope_theta", 1000000.0},
            {"sliding_window", 32768}, {"use_sliding_window", false}, {"max_window_layers", 21},
            {"tie_word_embeddings", true}, {"bos_token_id", 151643}, {"eos_token_id", 151645},
            {"rms_norm_eps", 1e-6}, {"torch_dtype", "bfloat16"}};
  ModelConfig c = read_model_config(j, "m/config.json");
  EXPECT_TRUE(c.attention_bias);  // qwen2 always has q/k/v biases
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.sliding_window);  // use_sliding_window is false
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  j["use_sliding_window"] = true;
  c = read_model_config(j, "x");
  EXPECT_EQ(c.sliding_window, 32768);
  EXPECT_EQ(c.max_window_layers, 21);
  j.erase("sliding_window");
  j.erase("max_window_layers");
  c = read_model_config(j, "x");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.max_window_layers, 28);

  // Class defaults when absent.
  json q = base("qwen2");
  q["num_key_value_heads"] = 4;
  c = read_model_config(q, "x");
  EXPECT_TRUE(c.bos_token_ids.empty());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 32768);
}

TEST(ModelConfig, QwenKvHeadDefaultIs32) {
  // Qwen2Config/Qwen3Config default num_key_value_heads to 32 (not to the head count).
  json j = base("qwen2");
  j["num_attention_heads"] = 32;
  j["hidden_size"] = 1024;
  EXPECT_EQ(read_model_config(j, "x").num_key_value_heads, 32);
  j["num_attention_heads"] = 8;
  expect_error(j, "num_attention_heads 8 is not a multiple of num_key_value_heads 32");
}

TEST(ModelConfig, Qwen3) {
  // Qwen3-0.6B's fields: head_dim 128 although hidden/heads = 64.
  json j = {{"model_type", "qwen3"}, {"vocab_size", 151936}, {"hidden_size", 1024},
            {"intermediate_size", 3072}, {"num_hidden_layers", 28}, {"num_attention_heads", 16},
            {"num_key_value_heads", 8}, {"head_dim", 128}, {"max_position_embeddings", 40960},
            {"rope_theta", 1000000}, {"rope_scaling", nullptr}, {"sliding_window", nullptr},
            {"use_sliding_window", false}, {"attention_bias", false}, {"tie_word_embeddings", true},
            {"eos_token_id", 151645}, {"bos_token_id", 151643}, {"torch_dtype", "bfloat16"}};
  ModelConfig c = read_model_config(j, "m/config.json");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);  // an integer in the JSON
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);
  j["attention_bias"] = true;
  EXPECT_TRUE(read_model_config(j, "x").attention_bias);
  j.erase("head_dim");
  EXPECT_EQ(read_model_config(j, "x").head_dim, 128);  // Qwen3Config default, not hidden/heads
  j["use_sliding_window"] = true;  // window null even when enabled
  EXPECT_FALSE(read_model_config(j, "x").sliding_window);
}

TEST(ModelConfig, RopeScalingVariants) {
  json j = base("llama");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ModelConfig c = read_model_config(j, "x");
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(read_model_config(j, "x").rope_scaling.type, RopeScaling::Type::None);

  j["max_position_embeddings"] = 32768;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  c = read_model_config(j, "x");
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Yarn);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 0);  // absent: factor is used as given
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_FALSE(c.rope_scaling.attention_factor);
  EXPECT_TRUE(c.rope_scaling.truncate);

  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8192},
                       {"beta_fast", 16}, {"beta_slow", 2}, {"attention_factor", 1.2}, {"mscale", 0.707},
                       {"mscale_all_dim", 0.5}, {"truncate", false}};
  c = read_model_config(j, "x");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(*c.rope_scaling.attention_factor, 1.2);
  EXPECT_DOUBLE_EQ(*c.rope_scaling.mscale, 0.707);
  EXPECT_DOUBLE_EQ(*c.rope_scaling.mscale_all_dim, 0.5);
  EXPECT_FALSE(c.rope_scaling.truncate);

  // Newer transformers nest theta and scaling in rope_parameters.
  json k = base("qwen3");
  k["num_key_value_heads"] = 8;
  k["rope_parameters"] = {{"rope_theta", 5e6}, {"rope_type", "linear"}, {"factor", 3.0}};
  c = read_model_config(k, "x");
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);

  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_error(j, "unsupported rope_scaling type 'dynamic'");
  for (const char* longrope : {"longrope", "su"}) {
    j["rope_scaling"] = {{"rope_type", longrope}, {"factor", 2.0}};
    expect_error(j, "rope_scaling.short_factor must be a non-empty list of numbers");
  }
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 2.0}}, {"long_factor", {1.0}}};
  expect_error(j, "short_factor and long_factor differ in length");
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, -2.0}}, {"long_factor", {1.0, 3.0}}};
  expect_error(j, "short_factor must hold positive numbers");
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 2.0}}, {"long_factor", {1.0, 3.0}}};
  expect_error(j, "original_max_position_embeddings (longrope) must be positive");
  j["rope_scaling"] = {{"type", "linear"}};
  expect_error(j, "missing required field rope_scaling.factor");
  j["rope_scaling"] = "linear";
  expect_error(j, "rope_scaling must be an object");
}

TEST(ModelConfig, PartialRotaryAndDtype) {
  json j = base("llama");
  j["partial_rotary_factor"] = 0.5;
  j["dtype"] = "float16";
  ModelConfig c = read_model_config(j, "x");
  EXPECT_EQ(c.rotary_dim, 16);
  EXPECT_EQ(c.torch_dtype, "float16");
  j["partial_rotary_factor"] = 0.01;
  expect_error(j, "partial_rotary_factor");
}

TEST(ModelConfig, Errors) {
  json j = base("gemma2");
  expect_error(j, "unsupported model_type 'gemma2' (supported: llama, mistral, qwen2, qwen3, ");
  j = base("llama");
  j.erase("model_type");
  expect_error(j, "missing required field model_type");
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads"}) {
    j = base("llama");
    j.erase(field);
    expect_error(j, std::string("missing required field ") + field);
  }
  j = base("llama");
  j["hidden_size"] = "256";
  expect_error(j, "field hidden_size must be an integer, not a string");
  j = base("llama");
  j["hidden_size"] = 255.5;
  expect_error(j, "field hidden_size must be an integer, not a float");
  j = base("llama");
  j["hidden_size"] = 256.0;  // whole-number floats are accepted
  EXPECT_EQ(read_model_config(j, "x").hidden_size, 256);
  j = base("llama");
  j["num_hidden_layers"] = 0;
  expect_error(j, "num_hidden_layers must be positive");
  j = base("llama");
  j["hidden_size"] = 250;
  expect_error(j, "hidden_size 250 is not a multiple of num_attention_heads 8");
  j = base("llama");
  j["num_key_value_heads"] = 3;
  expect_error(j, "not a multiple of num_key_value_heads 3");
  j = base("llama");
  j["tie_word_embeddings"] = 1;
  expect_error(j, "field tie_word_embeddings must be a bool");
  j = base("llama");
  j["eos_token_id"] = {1, "two"};
  expect_error(j, "field eos_token_id must be an integer");
  j = base("llama");
  j["rms_norm_eps"] = -1;
  expect_error(j, "rms_norm_eps must be positive");
  expect_error(json::array(), "config must be a JSON object");
  j = base("llama");
  j["vocab_size"] = 18446744073709551615ull;
  expect_error(j, "vocab_size is too large");
}

TEST(GenerationConfig, Parses) {
  json j = {{"bos_token_id", 1},   {"eos_token_id", {2, 7}}, {"do_sample", true}, {"temperature", 0.6},
            {"top_p", 0.9},        {"top_k", 20},            {"min_p", 0},        {"repetition_penalty", 1.1},
            {"max_new_tokens", 256}, {"transformers_version", "4.51.0"}, {"pad_token_id", nullptr}};
  GenerationConfig g = parse_generation_config(j, "g.json");
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(g.do_sample, true);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*g.top_p, 0.9);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(*g.min_p, 0.0);
  EXPECT_DOUBLE_EQ(*g.repetition_penalty, 1.1);
  EXPECT_EQ(g.max_new_tokens, 256);

  GenerationConfig empty = parse_generation_config(json::object(), "g.json");
  EXPECT_FALSE(empty.temperature);
  EXPECT_FALSE(empty.do_sample);
  EXPECT_FALSE(empty.bos_token_id);
  EXPECT_TRUE(empty.eos_token_ids.empty());
  EXPECT_EQ(parse_generation_config({{"eos_token_id", 5}}, "g").eos_token_ids, std::vector<int64_t>{5});

  EXPECT_THROW(parse_generation_config({{"temperature", "hot"}}, "g.json"), Error);
  EXPECT_THROW(parse_generation_config({{"do_sample", 1}}, "g.json"), Error);
  EXPECT_THROW(parse_generation_config(json::array(), "g.json"), Error);
  try {
    parse_generation_config({{"top_k", 1.5}}, "g.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "g.json: field top_k must be an integer, not a float");
  }
}

}  // namespace
}  // namespace corvid
