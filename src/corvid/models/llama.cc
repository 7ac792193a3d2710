// The Llama family: llama, mistral, qwen2, qwen3 (and SmolLM2, a llama). Pre-norm
// decoder layers: x += attn(norm(x)); x += mlp(norm(x)). The members differ in
// q/k/v (and o) biases, per-head q/k norms, sliding windows, tied embeddings and
// RoPE layout and scaling.
#include "corvid/core/error.h"
#include "corvid/models/families.h"
#include "corvid/models/prenorm_decoder.h"

namespace corvid {

namespace {

ConfigDefaults llama_defaults(const std::string& model_type) {
  if (model_type == "mistral") return {8, std::nullopt, 4096 * 32, {1}, {2}};
  if (model_type == "qwen2") return {32, std::nullopt, 32768, {}, {}};
  if (model_type == "qwen3") return {32, 128, 32768, {}, {}};
  return {std::nullopt, std::nullopt, 2048, {1}, {2}};  // llama
}

void configure_llama(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    // llama.cpp's converter permutes llama q/k rows so adjacent pairs rotate together;
    // qwen2/qwen3 are converted unpermuted (NEOX-style rotate-half).
    c.rope_interleaved = c.architecture == "llama";
    c.attention_bias = src.gguf->find_tensor("blk.0.attn_q.bias") != nullptr;
    c.qk_norm = src.gguf->find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    c.mlp_bias = src.gguf->find_tensor("blk.0.ffn_gate.bias") != nullptr;
    return;
  }
  const nlohmann::json& j = *src.hf;
  auto flag = [&](const char* key, bool fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(src.path, ": field ", key, " must be a bool");
    return it->get<bool>();
  };
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer()) fail(src.path, ": field ", key, " must be an integer");
    return it->get<int64_t>();
  };
  const std::string& t = c.architecture;
  if (t == "llama") {
    c.attention_bias = flag("attention_bias", false);
    c.mlp_bias = flag("mlp_bias", false);
  } else if (t == "mistral") {
    // Mistral slides on every layer unless sliding_window is null (Mistral v0.2+).
    c.sliding_window = j.contains("sliding_window") ? integer("sliding_window") : std::optional<int64_t>(4096);
    c.max_window_layers = 0;
  } else {
    c.attention_bias = t == "qwen2" ? true : flag("attention_bias", false);
    c.qk_norm = t == "qwen3";
    // Qwen ships sliding_window values that only apply when use_sliding_window is true,
    // and then only on layers i >= max_window_layers.
    if (flag("use_sliding_window", false)) {
      c.sliding_window = j.contains("sliding_window") ? integer("sliding_window") : std::optional<int64_t>(4096);
      c.max_window_layers = integer("max_window_layers").value_or(28);
    }
  }
  if (c.sliding_window && *c.sliding_window <= 0)
    fail(src.path, ": field sliding_window must be positive, not ", *c.sliding_window);
}

PreNormSpec llama_spec(const ModelConfig& c) {
  PreNormSpec spec;
  spec.qkv_bias = c.attention_bias;
  // attention_bias puts a bias on o_proj too (LlamaAttention, Qwen3Attention); qwen2's
  // biases are on q/k/v only.
  spec.o_bias = c.attention_bias && c.architecture != "qwen2";
  spec.mlp_bias = c.mlp_bias;
  spec.qk_norm = c.qk_norm;
  // transformers slides layers i >= max_window_layers (0 for mistral: all of them).
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    spec.window.push_back(c.sliding_window && i >= c.max_window_layers ? *c.sliding_window : 0);
  return spec;
}

}  // namespace

Family llama_family() {
  return {"llama",
          {"llama", "mistral", "qwen2", "qwen3"},
          {"llama", "qwen2", "qwen3"},
          llama_defaults,
          configure_llama,
          {},
          [](const ModelConfig& c, const FamilySource&, WeightLoader& w) {
            return make_prenorm_decoder(c, llama_spec(c), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical); mlx-lm 0.32.2 on the llama fixture; SmolLM2-135M and Qwen2.5-Coder-0.5B GGUF "
          "against transformers on the dequantized weights"};
}

}  // namespace corvid
