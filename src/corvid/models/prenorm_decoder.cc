#include "corvid/models/prenorm_decoder.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/decoder_base.h"
#include "corvid/models/layers/attention.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/rope_scaling.h"

namespace corvid {

namespace {

// Rows [row0, row0 + rows) of a 2-D weight, as a view (every layout keeps rows whole).
Tensor row_view(const Tensor& t, int64_t row0, int64_t rows) {
  return Tensor(t.dtype, {rows, t.cols()}, static_cast<char*>(t.data) + row0 * t.row_bytes(), t.device);
}

class PreNormDecoder final : public DecoderBase {
 public:
  PreNormDecoder(const ModelConfig& config, const PreNormSpec& spec, WeightLoader& w);

  void forward(const Step& step, const Tensor& logits) override;

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    layers::Attention attn;
    layers::GatedMlp mlp;
    layers::MoeBlock moe;  // used instead of mlp where sparse
    bool sparse = false;
  };

  PreNormSpec spec_;
  Tensor embed_tokens_;
  std::vector<Layer> layers_;
  layers::OutputHead head_;
};

PreNormDecoder::PreNormDecoder(const ModelConfig& config, const PreNormSpec& spec, WeightLoader& w)
    : DecoderBase(config, w.device()), spec_(spec) {
  const ModelConfig& c = config_;
  CORVID_CHECK(layers::parse_activation(c.hidden_act, w.source()) == layers::Activation::Silu, w.source(),
               ": hidden_act ", c.hidden_act, " is not supported (silu only)");
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, w.source(),
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
               c.num_key_value_heads);
  const int64_t L = c.num_hidden_layers;
  CORVID_CHECK(spec.rope.empty() || static_cast<int64_t>(spec.rope.size()) == L, w.source(), ": ", spec.rope.size(),
               " per-layer rope flags for ", L, " layers");
  CORVID_CHECK(spec.window.empty() || static_cast<int64_t>(spec.window.size()) == L, w.source(), ": ",
               spec.window.size(), " per-layer windows for ", L, " layers");
  CORVID_CHECK(spec.sparse.empty() || static_cast<int64_t>(spec.sparse.size()) == L, w.source(), ": ",
               spec.sparse.size(), " per-layer sparse flags for ", L, " layers");
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_dim = c.num_attention_heads * D, kv_dim = c.num_key_value_heads * D;
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
  const ops::RopeParams nope = identity_rope(D);
  embed_tokens_ = w.get("model.embed_tokens.weight", {c.vocab_size, H}, WeightRole::Embedding);
  head_ = layers::load_output_head(w, embed_tokens_, c.vocab_size, H, eps, c.tie_word_embeddings);
  head_.logit_scale = spec.logit_scale;
  int sparse_layers = 0;  // MoE layers so far (the offload takes the first N)
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer layer;
    layer.input_norm = w.norm(p + "input_layernorm.weight", H);
    layer.post_attention_norm = w.norm(p + "post_attention_layernorm.weight", H);
    layers::Attention& a = layer.attn = layers::attention_geometry(c, i);
    if (spec.attention_scale) a.scale = *spec.attention_scale;
    a.qk_norm = spec.qk_norm ? layers::QkNorm::PerHead : layers::QkNorm::None;
    a.rope = spec.rope.empty() || spec.rope[static_cast<size_t>(i)] ? rope : nope;
    a.window = spec.window.empty() ? 0 : spec.window[static_cast<size_t>(i)];
    if (spec.fused_checkpoint) {
      // One stored matrix each: q|k|v and gate|up rows, viewed as the parts.
      a.qkv_proj = w.get(p + "self_attn.qkv_proj.weight", {q_dim + 2 * kv_dim, H});
      a.q_proj = row_view(a.qkv_proj, 0, q_dim);
      a.k_proj = row_view(a.qkv_proj, q_dim, kv_dim);
      a.v_proj = row_view(a.qkv_proj, q_dim + kv_dim, kv_dim);
      a.o_proj = w.get(p + "self_attn.o_proj.weight", {H, q_dim});
      layers::GatedMlp& m = layer.mlp;
      m.ffn = I;
      m.gate_up_proj = w.get(p + "mlp.gate_up_proj.weight", {2 * I, H});
      m.gate_proj = row_view(m.gate_up_proj, 0, I);
      m.up_proj = row_view(m.gate_up_proj, I, I);
      m.down_proj = w.get(p + "mlp.down_proj.weight", {H, I});
      if (!w.fuses()) a.qkv_proj = m.gate_up_proj = Tensor();  // multiplied as their parts
    } else {
      load_attention(w, p + "self_attn.", H, {spec.qkv_bias, spec.o_bias, false}, a);
      layer.sparse = !spec.sparse.empty() && spec.sparse[static_cast<size_t>(i)];
      if (layer.sparse) {
        layers::load_moe(w, p + "mlp.", H, spec.moe, layer.moe, w.expert_residency(sparse_layers++));
      } else {
        load_gated_mlp(w, p + "mlp.", H, I, spec.mlp_bias, layers::Activation::Silu, layer.mlp);
      }
    }
    state_.push_back(a.state());
    layers_.push_back(std::move(layer));
  }
  std::vector<layers::MoeBlock*> offloaded;
  int sparse_index = 0;
  for (Layer& l : layers_)
    if (l.sparse && w.expert_residency(sparse_index++) == Residency::HostMapped) offloaded.push_back(&l.moe);
  layers::share_expert_staging(w, offloaded);
  storage_ = w.finish();
  bytes_per_token_ = layers::weight_bytes({&head_.norm, &head_.lm_head});
  bool any_sparse = false;
  for (const Layer& l : layers_) {
    bytes_per_token_ += l.attn.weight_bytes() + layers::weight_bytes({&l.input_norm, &l.post_attention_norm}) +
                        (l.sparse ? l.moe.active_weight_bytes() : l.mlp.weight_bytes());
    if (!l.sparse) continue;
    any_sparse = true;
    inactive_parameters_ += l.moe.inactive_parameters();
    routed_expert_bytes_.push_back(l.moe.routed_expert_bytes());
  }
  scratch_.dims = {H, q_dim, kv_dim, std::max(I, spec.moe.shared_ffn)};
  if (any_sparse) {
    scratch_.dims.experts = spec.moe.experts;
    scratch_.dims.top_k = spec.moe.top_k;
    scratch_.dims.expert_ffn = spec.moe.ffn;
  }
}

void PreNormDecoder::forward(const Step& step, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const float residual = spec_.residual_scale;
  scratch_.ensure(n);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  ops::embedding(embed_tokens_, step.tokens, x);
  if (spec_.embedding_scale != 1.0f) ops::scale(x, spec_.embedding_scale);
  ops::rms_norm(x, layers_[0].input_norm, eps, h);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    l.attn.forward(h, step, scratch_, h);
    if (residual != 1.0f) ops::scale(h, residual);
    ops::add_rms_norm(x, h, l.post_attention_norm, eps, h);
    if (l.sparse) {
      l.moe.forward(h, scratch_, h);
    } else {
      l.mlp.forward(h, scratch_, h);
    }
    if (residual != 1.0f) ops::scale(h, residual);
    // The residual add fused with the next layer's input norm.
    if (i + 1 < layers_.size()) {
      ops::add_rms_norm(x, h, layers_[i + 1].input_norm, eps, h);
    } else {
      ops::add(x, h);
    }
  }
  head_.forward(x, step.out_rows, scratch_, logits, step.output);
}

}  // namespace

std::unique_ptr<Model> make_prenorm_decoder(const ModelConfig& config, const PreNormSpec& spec, WeightLoader& w) {
  return std::make_unique<PreNormDecoder>(config, spec, w);
}

}  // namespace corvid
