// The Llama family: llama, mistral, qwen2, qwen3 (and SmolLM2, a llama). Pre-norm
// decoder layers: x += attn(norm(x)); x += mlp(norm(x)). The members differ in
// q/k/v (and o) biases, per-head q/k norms, sliding windows, tied embeddings and
// RoPE layout and scaling.
#include <cmath>

#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/models/families.h"
#include "corvid/models/layers/attention.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/rope_scaling.h"

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

class Llama final : public Model {
 public:
  Llama(const ModelConfig& config, WeightLoader& w);

  const ModelConfig& config() const override { return config_; }
  Device device() const override { return w_device_; }
  const std::vector<LayerState>& state_spec() const override { return spec_; }
  void forward(const Step& step, const Tensor& logits) override;
  uint64_t buffers_generation() const override { return scratch_.generation; }
  int64_t weight_bytes_per_token() const override { return bytes_per_token_; }
  int64_t parameter_count() const override { return storage_.parameters; }

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    layers::Attention attn;
    layers::GatedMlp mlp;
  };

  ModelConfig config_;
  Device w_device_;
  std::vector<LayerState> spec_;
  Tensor embed_tokens_;
  std::vector<Layer> layers_;
  layers::OutputHead head_;
  layers::Scratch scratch_;
  WeightStorage storage_;
  int64_t bytes_per_token_ = 0;
};

// CORVID_NO_FUSION=1 turns the fused decode GEMVs off, for A/B benchmarks.
bool fuse_projections() { return !env_flag("CORVID_NO_FUSION"); }

int64_t bytes(const Tensor& t) { return t.data ? static_cast<int64_t>(t.nbytes()) : 0; }

Llama::Llama(const ModelConfig& config, WeightLoader& w) : config_(config), w_device_(w.device()) {
  const ModelConfig& c = config_;
  CORVID_CHECK(c.hidden_act == "silu", w.source(), ": hidden_act ", c.hidden_act, " is not supported (silu only)");
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, w.source(),
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
               c.num_key_value_heads);
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ops::RopeParams rope = make_rope_params(c);
  if (w.has("rope_freqs.weight")) {
    // GGUF files of Llama 3.x store their RoPE scaling as one divisor per frequency
    // (llama.cpp's rope_freqs), computed by the converter from the llama3 rope_scaling.
    const std::vector<float> divisors = w.read_f32("rope_freqs.weight", static_cast<int64_t>(rope.inv_freq.size()));
    for (size_t i = 0; i < divisors.size(); ++i) {
      CORVID_CHECK(std::isfinite(divisors[i]) && divisors[i] > 0, w.source(), ": rope_freqs.weight[", i, "] is ",
                   divisors[i]);
      rope.inv_freq[i] /= divisors[i];
    }
  }
  embed_tokens_ = w.get("model.embed_tokens.weight", {c.vocab_size, H}, WeightRole::Embedding);
  head_.norm = w.norm("model.norm.weight", H);
  head_.eps = eps;
  head_.lm_head = w.optional("lm_head.weight", {c.vocab_size, H}, WeightRole::Projection, !c.tie_word_embeddings);
  if (!head_.lm_head.data) {
    CORVID_CHECK(c.tie_word_embeddings, w.source(), ": missing tensor lm_head.weight (tie_word_embeddings is false)");
    head_.lm_head = embed_tokens_;
  }
  const bool fuse = fuse_projections();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer L;
    L.input_norm = w.norm(p + "input_layernorm.weight", H);
    L.post_attention_norm = w.norm(p + "post_attention_layernorm.weight", H);
    layers::Attention& a = L.attn;
    a.layer = i;
    a.heads = c.num_attention_heads, a.kv_heads = c.num_key_value_heads, a.head_dim = D;
    a.scale = 1.0f / std::sqrt(static_cast<float>(D));
    a.eps = eps;
    a.qk_norm = c.qk_norm ? layers::QkNorm::PerHead : layers::QkNorm::None;
    a.rope = rope;
    // transformers slides layers i >= max_window_layers (0 for mistral: all of them).
    if (c.sliding_window && i >= c.max_window_layers) a.window = *c.sliding_window;
    // attention_bias puts a bias on o_proj too (LlamaAttention, Qwen3Attention); qwen2's
    // biases are on q/k/v only.
    const bool o_bias = c.attention_bias && c.architecture != "qwen2";
    load_attention(w, p + "self_attn.", H, {c.attention_bias, o_bias, false, fuse}, a);
    load_gated_mlp(w, p + "mlp.", H, I, c.mlp_bias, layers::Activation::Silu, L.mlp);
    if (!fuse) L.mlp.gate_up_proj = Tensor();
    spec_.push_back(a.window > 0 ? LayerState{StateKind::SlidingKV, a.kv_heads, D, a.window}
                                 : LayerState{StateKind::FullKV, a.kv_heads, D});
    layers_.push_back(std::move(L));
  }
  storage_ = w.finish();
  bytes_per_token_ = bytes(head_.norm) + bytes(head_.lm_head);
  for (const Layer& L : layers_) {
    for (const Tensor* t : {&L.input_norm, &L.post_attention_norm, &L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj,
                            &L.attn.o_proj, &L.attn.q_bias, &L.attn.k_bias, &L.attn.v_bias, &L.attn.o_bias,
                            &L.attn.q_norm, &L.attn.k_norm, &L.mlp.gate_proj, &L.mlp.up_proj, &L.mlp.down_proj,
                            &L.mlp.gate_bias, &L.mlp.up_bias, &L.mlp.down_bias})
      bytes_per_token_ += bytes(*t);
  }
  scratch_.device = w_device_;
  scratch_.dims = {H, c.num_attention_heads * D, c.num_key_value_heads * D, I};
}

void Llama::forward(const Step& step, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const float eps = static_cast<float>(config_.rms_norm_eps);
  scratch_.ensure(n);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  ops::embedding(embed_tokens_, step.tokens, x);
  ops::rms_norm(x, layers_[0].input_norm, eps, h);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    L.attn.forward(h, step, scratch_, h);
    ops::add_rms_norm(x, h, L.post_attention_norm, eps, h);
    L.mlp.forward(h, scratch_, h);
    // The residual add fused with the next layer's input norm.
    if (i + 1 < layers_.size()) {
      ops::add_rms_norm(x, h, layers_[i + 1].input_norm, eps, h);
    } else {
      ops::add(x, h);
    }
  }
  head_.forward(x, step.out_rows, scratch_, logits);
}

}  // namespace

Family llama_family() {
  return {"llama",
          {"llama", "mistral", "qwen2", "qwen3"},
          {"llama", "qwen2", "qwen3"},
          llama_defaults,
          configure_llama,
          {},
          [](const ModelConfig& c, const FamilySource&, WeightLoader& w) -> std::unique_ptr<Model> {
            return std::make_unique<Llama>(c, w);
          }};
}

}  // namespace corvid
