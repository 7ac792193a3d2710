// Gemma 3 text (gemma3_text; GGUF gemma3). Sandwich norms around both blocks:
//   x += post_attn_norm(attn(in_norm(x)));  x += post_ffw_norm(mlp(pre_ffw_norm(x)))
// with (1 + w) RMSNorms (HF stores w zero-centred; llama.cpp's converter stores
// 1 + w), GeGLU (tanh GELU), embeddings scaled by sqrt(hidden), per-head q/k norms,
// scores scaled by query_pre_attn_scalar^-0.5, and two kinds of layer from
// layer_types: sliding (window, local RoPE base 1e4, unscaled) and full (global
// base 1e6 with the config's scaling). Final logit soft-capping when configured.
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/families.h"
#include "corvid/models/gemma_common.h"
#include "corvid/models/decoder_base.h"
#include "corvid/models/layers/attention.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/rope_scaling.h"

namespace corvid {


namespace {


// What Gemma 3 reads beyond ModelConfig.
struct Gemma3Params {
  double query_pre_attn_scalar = 256;
  double local_theta = 10000.0, global_theta = 1000000.0;
  RopeScaling global_scaling;  // rope_scaling applies to full layers only
  float final_softcap = 0.0f;
  bool norm_plus_one = true;   // HF: (1 + w) with w stored; GGUF: 1 + w stored
  std::vector<bool> sliding;   // per layer
};

void configure_gemma3(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    const std::string p = c.architecture + ".";
    c.sliding_window = src.gguf->get_int(p + "attention.sliding_window", 4096);
    c.hidden_act = "gelu_pytorch_tanh";  // llama.cpp's gemma3 graph; GGUF does not say
  } else {
    const nlohmann::json& j = *src.hf;
    auto it = j.find("sliding_window");
    c.sliding_window = it == j.end() || it->is_null() ? 4096 : it->get<int64_t>();
    auto bidirectional = j.find("use_bidirectional_attention");
    if (bidirectional != j.end() && bidirectional->is_boolean() && bidirectional->get<bool>())
      fail(src.path, ": use_bidirectional_attention is not supported (a causal decoder only)");
    auto softcap = j.find("attn_logit_softcapping");
    if (softcap != j.end() && !softcap->is_null())
      fail(src.path, ": attn_logit_softcapping is not supported (Gemma 3 configs leave it null)");
  }
  CORVID_CHECK(*c.sliding_window > 0, src.path, ": sliding_window must be positive, not ", *c.sliding_window);
  if (c.layer_types.empty()) {
    // Before layer_types: every sliding_window_pattern-th layer (default 6) is full.
    int64_t pattern = 6;
    if (src.hf && src.hf->contains("sliding_window_pattern")) pattern = (*src.hf)["sliding_window_pattern"].get<int64_t>();
    CORVID_CHECK(pattern > 0, src.path, ": sliding_window_pattern must be positive");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % pattern ? "sliding_attention" : "full_attention");
  }
  for (const std::string& t : c.layer_types)
    CORVID_CHECK(t == "sliding_attention" || t == "full_attention", src.path, ": layer type '", t,
                 "' is not one of Gemma 3's (sliding_attention, full_attention)");
}

double number_or(const nlohmann::json& j, const char* key, double fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(source, ": field ", key, " must be a number");
  return it->get<double>();
}

Gemma3Params gemma3_params(const ModelConfig& c, const FamilySource& src) {
  Gemma3Params g;
  for (const std::string& t : c.layer_types) g.sliding.push_back(t == "sliding_attention");
  if (src.gguf) {
    // llama.cpp's gemma3: the local base is fixed at 1e4; scores are scaled by head_dim
    // except on the 27B (62 layers), whose query_pre_attn_scalar is hidden / heads.
    const std::string p = c.architecture + ".";
    g.global_theta = c.rope_theta;
    g.global_scaling = c.rope_scaling;
    g.query_pre_attn_scalar = c.num_hidden_layers == 62 ? static_cast<double>(c.hidden_size / c.num_attention_heads)
                                                         : static_cast<double>(c.head_dim);
    g.final_softcap = static_cast<float>(src.gguf->get_float(p + "final_logit_softcapping", 0.0));
    g.norm_plus_one = false;
    return g;
  }
  const nlohmann::json& j = *src.hf;
  g.query_pre_attn_scalar = number_or(j, "query_pre_attn_scalar", 256, src.path);
  CORVID_CHECK(g.query_pre_attn_scalar > 0, src.path, ": query_pre_attn_scalar must be positive");
  g.final_softcap = static_cast<float>(number_or(j, "final_logit_softcapping", 0.0, src.path));
  auto rp = j.find("rope_parameters");
  if (rp != j.end() && rp->is_object() && rp->contains("full_attention")) {
    // transformers 5: one rope_parameters entry per layer type.
    const nlohmann::json& full = (*rp)["full_attention"];
    g.global_theta = number_or(full, "rope_theta", 1000000.0, src.path);
    g.global_scaling = parse_rope_scaling(full, src.path, "rope_parameters.full_attention");
    if (rp->contains("sliding_attention")) {
      const nlohmann::json& local = (*rp)["sliding_attention"];
      g.local_theta = number_or(local, "rope_theta", 10000.0, src.path);
      CORVID_CHECK(parse_rope_scaling(local, src.path, "rope_parameters.sliding_attention").type ==
                       RopeScaling::Type::None,
                   src.path, ": scaled RoPE on sliding layers is not supported");
    }
  } else {
    // Classic keys: rope_theta and rope_scaling are the global layers', rope_local_base_freq the local ones'.
    g.global_theta = number_or(j, "rope_theta", 1000000.0, src.path);
    g.local_theta = number_or(j, "rope_local_base_freq", 10000.0, src.path);
    g.global_scaling = c.rope_scaling;
  }
  CORVID_CHECK(g.global_theta > 0 && g.local_theta > 0, src.path, ": rope thetas must be positive");
  return g;
}

class Gemma3 final : public DecoderBase {
 public:
  Gemma3(const ModelConfig& config, const Gemma3Params& g, WeightLoader& w);

  void forward(const Step& step, const Tensor& logits) override;

 private:
  struct Layer {
    SandwichNorms norms;
    layers::Attention attn;
    layers::GatedMlp mlp;
  };

  Tensor embed_tokens_;
  float embed_scale_ = 1.0f;
  std::vector<Layer> layers_;
  layers::OutputHead head_;
};

Gemma3::Gemma3(const ModelConfig& config, const Gemma3Params& g, WeightLoader& w)
    : DecoderBase(config, w.device()) {
  const ModelConfig& c = config_;
  check_gemma_geometry(c, w.source(), "Gemma 3");
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // transformers casts sqrt(hidden) to the weights' dtype; in float32, as corvid computes.
  embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(H)));
  const ops::RopeParams local = make_rope_params(c, g.local_theta, RopeScaling{});
  const ops::RopeParams global = make_rope_params(c, g.global_theta, g.global_scaling);
  embed_tokens_ = w.get("model.embed_tokens.weight", {c.vocab_size, H}, WeightRole::Embedding);
  head_ = layers::load_output_head(w, embed_tokens_, c.vocab_size, H, eps, c.tie_word_embeddings, g.norm_plus_one);
  head_.softcap = g.final_softcap;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const bool sliding = g.sliding[static_cast<size_t>(i)];
    Layer L;
    L.norms = load_sandwich_norms(w, p, H, g.norm_plus_one);
    layers::Attention& a = L.attn = layers::attention_geometry(c, i);
    a.scale = static_cast<float>(1.0 / std::sqrt(g.query_pre_attn_scalar));
    a.qk_norm = layers::QkNorm::PerHead;
    a.rope = sliding ? local : global;
    a.window = sliding ? *c.sliding_window : 0;
    load_attention(w, p + "self_attn.", H, {false, false, g.norm_plus_one}, a);
    load_gated_mlp(w, p + "mlp.", H, I, false, layers::Activation::GeluTanh, L.mlp);
    state_.push_back(a.state());
    layers_.push_back(std::move(L));
  }
  storage_ = w.finish();
  bytes_per_token_ = layers::weight_bytes({&head_.norm, &head_.lm_head});
  for (const Layer& L : layers_)
    bytes_per_token_ += L.attn.weight_bytes() + L.mlp.weight_bytes() + L.norms.weight_bytes();
  scratch_.dims = {H, c.num_attention_heads * D, c.num_key_value_heads * D, I};
}

void Gemma3::forward(const Step& step, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const float eps = static_cast<float>(config_.rms_norm_eps);
  scratch_.ensure(n);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  ops::embedding(embed_tokens_, step.tokens, x);
  ops::scale(x, embed_scale_);
  ops::rms_norm(x, layers_[0].norms.input, eps, h);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    L.attn.forward(h, step, scratch_, h);
    ops::rms_norm(h, L.norms.post_attention, eps, h);
    ops::add_rms_norm(x, h, L.norms.pre_feedforward, eps, h);
    L.mlp.forward(h, scratch_, h);
    ops::rms_norm(h, L.norms.post_feedforward, eps, h);
    if (i + 1 < layers_.size()) {
      ops::add_rms_norm(x, h, layers_[i + 1].norms.input, eps, h);
    } else {
      ops::add(x, h);
    }
  }
  head_.forward(x, step.out_rows, scratch_, logits, step.output);
}

// llama.cpp's gemma3 names where they differ from the shared ones (ffn_norm is the
// pre-feedforward norm here, not the post-attention one).
const GgufName kGemma3Names[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};

}  // namespace

Family gemma3_family() {
  return {"gemma3",
          {"gemma3_text"},
          {"gemma3"},
          gemma_defaults,
          configure_gemma3,
          kGemma3Names,
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) -> std::unique_ptr<Model> {
            return std::make_unique<Gemma3>(c, gemma3_params(c, src), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical) (gemma3, gemma3_v5); mlx-lm 0.32.2 on gemma3; Gemma 3 270M GGUF against "
          "transformers on the dequantized weights"};
}

}  // namespace corvid
