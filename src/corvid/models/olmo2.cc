// OLMo 2: post-norm decoder layers — x += post_attn_norm(attn(x)); x += post_mlp_norm(mlp(x))
// (no norm before either block) — with RMSNorm over the whole q and k projections
// (not per head) before RoPE. GGUF olmo2 uses llama.cpp's post_attention_norm and
// post_ffw_norm names.
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/decoder_base.h"
#include "corvid/models/layers/attention.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/rope_scaling.h"

namespace corvid {

namespace {

ConfigDefaults olmo2_defaults(const std::string&) {
  ConfigDefaults d;
  d.max_position_embeddings = 2048;
  d.bos = {};
  d.eos = {50279};
  d.rms_norm_eps = 1e-5;
  return d;
}

void configure_olmo2(ModelConfig& c, const FamilySource& src) {
  if (src.hf) {
    CORVID_CHECK(!config_fields::boolean(*src.hf, "attention_bias", false, src.path), src.path,
                 ": OLMo 2 with attention_bias is not supported");
  }
}

class Olmo2 final : public DecoderBase {
 public:
  Olmo2(const ModelConfig& config, WeightLoader& w);

  void forward(const Step& step, const Tensor& logits) override;

 private:
  struct Layer {
    Tensor post_attention_norm, post_feedforward_norm;
    layers::Attention attn;
    layers::GatedMlp mlp;
  };

  Tensor embed_tokens_;
  std::vector<Layer> layers_;
  layers::OutputHead head_;
};

Olmo2::Olmo2(const ModelConfig& config, WeightLoader& w) : DecoderBase(config, w.device()) {
  const ModelConfig& c = config_;
  CORVID_CHECK(layers::parse_activation(c.hidden_act, w.source()) == layers::Activation::Silu, w.source(),
               ": hidden_act ", c.hidden_act, " is not supported (silu only)");
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, w.source(),
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
               c.num_key_value_heads);
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const ops::RopeParams rope = make_rope_params(c);
  embed_tokens_ = w.get("model.embed_tokens.weight", {c.vocab_size, H}, WeightRole::Embedding);
  head_ = layers::load_output_head(w, embed_tokens_, c.vocab_size, H, eps, c.tie_word_embeddings);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer layer;
    layer.post_attention_norm = w.norm(p + "post_attention_layernorm.weight", H);
    layer.post_feedforward_norm = w.norm(p + "post_feedforward_layernorm.weight", H);
    layers::Attention& a = layer.attn = layers::attention_geometry(c, i);
    a.qk_norm = layers::QkNorm::Whole;
    a.rope = rope;
    load_attention(w, p + "self_attn.", H, {}, a);
    load_gated_mlp(w, p + "mlp.", H, I, false, layers::Activation::Silu, layer.mlp);
    state_.push_back(a.state());
    layers_.push_back(std::move(layer));
  }
  storage_ = w.finish();
  bytes_per_token_ = layers::weight_bytes({&head_.norm, &head_.lm_head});
  for (const Layer& l : layers_)
    bytes_per_token_ += l.attn.weight_bytes() + l.mlp.weight_bytes() +
                        layers::weight_bytes({&l.post_attention_norm, &l.post_feedforward_norm});
  scratch_.dims = {H, c.num_attention_heads * D, c.num_key_value_heads * D, I};
}

void Olmo2::forward(const Step& step, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const float eps = static_cast<float>(config_.rms_norm_eps);
  scratch_.ensure(n);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  ops::embedding(embed_tokens_, step.tokens, x);
  for (const Layer& l : layers_) {
    l.attn.forward(x, step, scratch_, h);
    ops::rms_norm(h, l.post_attention_norm, eps, h);
    ops::add(x, h);
    l.mlp.forward(x, scratch_, h);
    ops::rms_norm(h, l.post_feedforward_norm, eps, h);
    ops::add(x, h);
  }
  head_.forward(x, step.out_rows, scratch_, logits, step.output);
}

// llama.cpp's olmo2: the two post-norms.
const GgufName kOlmo2Names[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};

}  // namespace

Family olmo2_family() {
  return {"olmo2", {"olmo2"}, {"olmo2"}, olmo2_defaults, configure_olmo2, kOlmo2Names,
          [](const ModelConfig& c, const FamilySource&, WeightLoader& w) -> std::unique_ptr<Model> {
            return std::make_unique<Olmo2>(c, w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical)"};
}

}  // namespace corvid
