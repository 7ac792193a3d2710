#include <gtest/gtest.h>

#include <filesystem>

#include "corvid/models/registry.h"
#include "corvid//core/error.h"
#include "corvid/formats/model_files.h"
#include "safetensors_builder.h"

namespace corvid {
namespace {

using testing::SafetensorsBuilder;
using testing::ScratchDir;
using json = nlohmann::json;

const std::string kStories = std::string(CORVID_SOURCE_DIR) + "/tests/data/stories260K.gguf";

template <class Fn> void expect_message(Fn fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected: " << expected;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

// Every tensor of a 1-layer llama with dim 8, 2 heads of 4, FFN 16, vocab 4 (tied).
SafetensorsBuilder tiny_llama_weights() {
  SafetensorsBuilder s;
  s.add("model.embed_tokens.weight", "F32", {4, 8}, 4).add("model.norm.weight", "F32", {8}, 4);
  const std::string p = "model.layers.0.";
  s.add(p + "input_layernorm.weight", "F32", {8}, 4).add(p + "post_attention_layernorm.weight", "F32", {8}, 4);
  for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"})
    s.add(p + "self_attn." + proj + ".weight", "BF16", {8, 8}, 2);
  s.add(p + "mlp.gate_proj.weight", "BF16", {16, 8}, 2).add(p + "mlp.up_proj.weight", "BF16", {16, 8}, 2);
  s.add(p + "mlp.down_proj.weight", "BF16", {8, 16}, 2);
  return s;
}

// A complete tiny llama folder.
void write_folder(const ScratchDir& d, bool tokenizer = true) {
  json config = {{"model_type", "llama"}, {"vocab_size", 4},      {"hidden_size", 8},
                 {"intermediate_size", 16}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                 {"tie_word_embeddings", true}, {"torch_dtype", "float32"}};
  d.write("config.json", config.dump());
  d.write("generation_config.json", json{{"temperature", 0.7}, {"eos_token_id", {2, 3}}}.dump());
  d.write("model.safetensors", tiny_llama_weights().build());
  if (tokenizer) d.write("tokenizer.json", std::string("{}"));
}

TEST(ModelFiles, OpensGguf) {
  ModelFiles m = open_model(kStories);
  EXPECT_TRUE(m.is_gguf());
  EXPECT_EQ(m.path, kStories);
  EXPECT_EQ(m.config.architecture, "llama");
  EXPECT_EQ(m.config.num_hidden_layers, 5);
  EXPECT_TRUE(m.config.rope_interleaved);
  EXPECT_TRUE(m.weights.has("model.layers.4.mlp.down_proj.weight"));
  EXPECT_TRUE(m.tokenizer_json.empty());
  EXPECT_TRUE(m.tokenizer_config_json.empty());
  EXPECT_EQ(m.gguf->get_string("tokenizer.ggml.model"), "llama");
}

TEST(ModelFiles, OpensSmolLM2WhenPresent) {
  std::string path = std::string(CORVID_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* env = std::getenv("CORVID_SMOLLM2_GGUF")) path = env;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not present";
  ModelFiles m = open_model(path);  // includes the weight/config shape check
  EXPECT_EQ(m.weights.tensors.size(), 272u);
  EXPECT_TRUE(m.config.tie_word_embeddings);
}

TEST(ModelFiles, GgufByMagicWhateverTheName) {
  ScratchDir d;
  std::filesystem::copy_file(kStories, d.file("model.bin"));
  EXPECT_TRUE(open_model(d.file("model.bin")).is_gguf());
}

TEST(ModelFiles, OpensFolder) {
  ScratchDir d;
  write_folder(d);
  ModelFiles m = open_model(d.str());
  EXPECT_FALSE(m.is_gguf());
  EXPECT_EQ(m.config.hidden_size, 8);
  EXPECT_TRUE(m.config.tie_word_embeddings);
  EXPECT_FALSE(m.config.rope_interleaved);
  EXPECT_DOUBLE_EQ(*m.generation.temperature, 0.7);
  EXPECT_EQ(m.generation.eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.tokenizer_json, d.file("tokenizer.json"));
  EXPECT_TRUE(m.tokenizer_config_json.empty());
  EXPECT_EQ(m.weights.get("model.embed_tokens.weight").shape_str(), "[4, 8]");

  d.write("tokenizer_config.json", std::string("{}"));
  std::filesystem::remove(d.file("generation_config.json"));
  m = open_model(d.str());
  EXPECT_EQ(m.tokenizer_config_json, d.file("tokenizer_config.json"));
  EXPECT_FALSE(m.generation.temperature);
}

TEST(ModelFiles, Errors) {
  expect_message([] { open_model("/nonexistent/model"); }, "/nonexistent/model: no such file or directory");
  ScratchDir d;
  expect_message([&] { open_model(d.str()); }, d.str() + ": no config.json (not a Hugging Face model folder)");
  write_folder(d, /*tokenizer=*/false);
  expect_message([&] { open_model(d.str()); }, d.str() + ": no tokenizer.json (a tokenizer is required)");
  d.write("tokenizer.json", std::string("{}"));
  d.write("notes.txt", std::string("hello"));
  expect_message([&] { open_model(d.file("notes.txt")); },
                 d.file("notes.txt") + ": not a model (expected a .gguf file or a Hugging Face model folder)");
  d.write("config.json", std::string("{\"model_type\": "));
  try {
    open_model(d.str());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(d.file("config.json") + ": bad JSON: ", 0), 0u) << e.what();
  }
  d.write("config.json", json{{"model_type", "gpt2"}}.dump());
  try {
    open_model(d.str());
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(d.file("config.json") + ": unsupported model_type 'gpt2' (supported: llama, mistral, ", 0), 0u)
        << msg;
    EXPECT_NE(msg.find("gemma3_text"), std::string::npos) << msg;
  }
  // Shapes, missing and unused tensors are checked when the model binds its weights.
  write_folder(d);
  auto bind = [&] { make_model(open_model(d.str()), Device::CPU); };
  EXPECT_NO_THROW(bind());
  SafetensorsBuilder wrong = tiny_llama_weights();
  wrong.add("model.layers.0.mlp.down_proj.weight", "BF16", {16, 8}, 2);  // transposed
  d.write("model.safetensors", wrong.build());
  expect_message(bind, d.file("model.safetensors") +
                           ": tensor model.layers.0.mlp.down_proj.weight has shape [16, 8], the config implies [8, 16]");
  SafetensorsBuilder extra = tiny_llama_weights();
  extra.add("model.layers.0.self_attn.o_proj.bias", "F32", {8}, 4);  // attention_bias is false
  d.write("model.safetensors", extra.build());
  expect_message(bind, d.file("model.safetensors") +
                           ": tensor model.layers.0.self_attn.o_proj.bias is not used by the model (a config that "
                           "disagrees with the weights?)");
  SafetensorsBuilder missing;
  missing.add("model.embed_tokens.weight", "F32", {4, 8}, 4).add("model.norm.weight", "F32", {8}, 4);
  d.write("model.safetensors", missing.build());
  expect_message(bind, d.file("model.safetensors") + ": missing tensor model.layers.0.input_layernorm.weight");
  std::filesystem::remove(d.file("model.safetensors"));
  expect_message([&] { open_model(d.str()); }, d.str() + ": no model.safetensors or model.safetensors.index.json");
  d.write("broken.gguf", std::string("GGUF\x01"));
  EXPECT_THROW(open_model(d.file("broken.gguf")), Error);
}

}  // namespace
}  // namespace corvid
