// Gemma 4 text (gemma4_text, transformers' Gemma4ForCausalLM). Gemma 3's sandwich
// layer with:
// - plain-weight RMSNorms (no 1 + w), attention scale 1 (the q/k norms take its
//   place), and a weightless RMSNorm on the values;
// - two head geometries: sliding layers head_dim / num_key_value_heads, full layers
//   global_head_dim and, with attention_k_eq_v, num_global_key_value_heads and no
//   v_proj (the values are the raw key projection);
// - RoPE per layer type: sliding default (theta 1e4), full proportional (the first
//   partial_rotary_factor · D/2 frequencies over the whole head_dim D, the rest 0);
// - per-layer embeddings (PLE, hidden_size_per_layer_input P > 0): a [T, L·P] input
//   made once per step from a second embedding table and a projection of the token
//   embeddings, gated into the residual stream after each layer's MLP;
// - a per-layer output scalar (layer_scalar);
// - KV-shared layers (the last num_kv_shared_layers): no K/V of their own, they read
//   the last earlier layer of their type (StateKind::SharedKV) and, with
//   use_double_wide_mlp, have a 2× wide MLP.
// The MoE block (enable_moe_block) waits for the MoE layer (issue 19) and is refused.
//
// From GGUF (general.architecture gemma4) as llama.cpp's converter writes it: per-layer
// arrays for the layer types (attention.sliding_window_pattern) and, where they differ,
// KV heads and MLP widths; key_length is the full layers' head size, key_length_swa the
// sliding ones'; attention_k_eq_v shows only as full layers without attn_v; proportional
// RoPE comes as rope_freqs.weight (1 where a pair rotates, 1e30 where it does not).
#include <cmath>
#include <variant>

#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/decoder_base.h"
#include "corvid/models/families.h"
#include "corvid/models/gemma_common.h"
#include "corvid/models/layers/attention.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/rope_scaling.h"

namespace corvid {

namespace {

namespace cf = config_fields;


// One layer type's RoPE as Gemma 4 writes it in rope_parameters.
struct Gemma4Rope {
  std::string type = "default";  // default | proportional
  double theta = 10000.0, partial = 1.0, factor = 1.0;
  std::vector<float> divisors;  // GGUF rope_freqs: per frequency (empty: none)
};

// What Gemma 4 reads beyond ModelConfig.
struct Gemma4Params {
  int64_t global_head_dim = 512, global_kv_heads = 0;  // 0: num_key_value_heads
  bool k_eq_v = false, double_wide_mlp = false;
  int64_t per_layer_input = 0, per_layer_vocab = 0, kv_shared_layers = 0;
  float final_softcap = 0.0f;
  Gemma4Rope local{"default", 10000.0, 1.0, 1.0, {}}, global{"proportional", 1000000.0, 0.25, 1.0, {}};
  std::vector<bool> sliding;  // per layer
  bool gguf = false;          // llama.cpp's layout (rope_freqs, optional layer scales)
};

Gemma4Rope parse_rope(const nlohmann::json& j, const std::string& source, const Gemma4Rope& fallback,
                      const char* field) {
  if (!j.is_object()) fail(source, ": rope_parameters.", field, " must be an object");
  Gemma4Rope r = fallback;
  if (const nlohmann::json* t = cf::find(j, "rope_type")) {
    if (!t->is_string()) fail(source, ": rope_parameters.", field, ".rope_type must be a string");
    r.type = t->get<std::string>();
  }
  if (r.type != "default" && r.type != "proportional")
    fail(source, ": rope_parameters.", field, ".rope_type '", r.type,
         "' is not supported for Gemma 4 (default, proportional)");
  r.theta = cf::number(j, "rope_theta", r.theta, source);
  r.partial = cf::number(j, "partial_rotary_factor", r.type == "proportional" ? r.partial : 1.0, source);
  r.factor = cf::number(j, "factor", 1.0, source);
  if (!(r.theta > 0) || !(r.factor > 0) || !(r.partial > 0 && r.partial <= 1))
    fail(source, ": rope_parameters.", field, " needs rope_theta > 0, factor > 0 and partial_rotary_factor in (0, 1]");
  return r;
}

// attention.sliding_window_pattern: one bool a layer (true: sliding).
std::vector<bool> gguf_sliding_layers(const GgufFile& g, int64_t layers) {
  const std::string key = "gemma4.attention.sliding_window_pattern";
  const GgufValue* v = g.find(key);
  CORVID_CHECK(v, g.path(), ": missing metadata ", key);
  const GgufArray* a = std::get_if<GgufArray>(&v->value);
  CORVID_CHECK(a && static_cast<int64_t>(a->size()) == layers, g.path(), ": metadata ", key, " must be an array of ",
               layers, " booleans");
  std::vector<bool> out;
  for (const GgufValue& e : *a) {
    const bool* b = std::get_if<bool>(&e.value);
    CORVID_CHECK(b, g.path(), ": metadata ", key, " must hold booleans");
    out.push_back(*b);
  }
  return out;
}

// A per-layer integer that may be stored once or as an array of one value a layer.
int64_t gguf_layer_int(const GgufFile& g, const std::string& key, int64_t layer, int64_t layers, int64_t fallback) {
  const GgufValue* v = g.find(key);
  if (!v) return fallback;
  if (!std::holds_alternative<GgufArray>(v->value)) return g.get_int(key);
  const std::vector<int64_t> all = g.get_int_array(key);
  CORVID_CHECK(static_cast<int64_t>(all.size()) == layers, g.path(), ": metadata ", key, " has ", all.size(),
               " values for ", layers, " layers");
  return all[static_cast<size_t>(layer)];
}

void configure_gemma4_gguf(ModelConfig& c, const GgufFile& g) {
  const std::string p = "gemma4.";
  CORVID_CHECK(!g.has(p + "expert_count"), g.path(), ": Gemma 4's MoE block is not supported yet");
  c.hidden_act = "gelu_pytorch_tanh";  // llama.cpp's gemma4 graph; GGUF does not say
  const std::vector<bool> sliding = gguf_sliding_layers(g, c.num_hidden_layers);
  c.layer_types.clear();
  int64_t first_sliding = -1;
  for (size_t i = 0; i < sliding.size(); ++i) {
    c.layer_types.push_back(sliding[i] ? "sliding_attention" : "full_attention");
    if (sliding[i] && first_sliding < 0) first_sliding = static_cast<int64_t>(i);
  }
  // ModelConfig's head_dim and KV heads are the sliding layers' (transformers' head_dim).
  c.head_dim = g.get_int(p + "attention.key_length_swa");
  CORVID_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && g.get_int(p + "attention.value_length_swa", c.head_dim) == c.head_dim,
               g.path(), ": attention.key_length_swa must be even, positive and equal value_length_swa");
  c.rotary_dim = c.head_dim;
  c.num_key_value_heads = gguf_layer_int(g, p + "attention.head_count_kv", std::max<int64_t>(first_sliding, 0),
                                         c.num_hidden_layers, c.num_attention_heads);
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, g.path(),
               ": head_count ", c.num_attention_heads, " is not a multiple of head_count_kv ", c.num_key_value_heads);
  c.intermediate_size = gguf_layer_int(g, p + "feed_forward_length", 0, c.num_hidden_layers, 0);
  CORVID_CHECK(c.intermediate_size > 0, g.path(), ": feed_forward_length must be positive");
  c.sliding_window = g.get_int(p + "attention.sliding_window");
  CORVID_CHECK(*c.sliding_window > 0, g.path(), ": attention.sliding_window must be positive");
}

void configure_gemma4(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    configure_gemma4_gguf(c, *src.gguf);
    return;
  }
  const nlohmann::json& j = *src.hf;
  c.sliding_window = cf::integer(j, "sliding_window", src.path).value_or(512);
  CORVID_CHECK(*c.sliding_window > 0, src.path, ": sliding_window must be positive, not ", *c.sliding_window);
  if (const nlohmann::json* b = cf::find(j, "use_bidirectional_attention")) {
    // "vision" opens image spans only, which a text model never has; "all" is an encoder.
    if (!b->is_string() || b->get<std::string>() != "vision")
      fail(src.path, ": use_bidirectional_attention ", b->dump(), " is not supported (a causal decoder only)");
  }
  if (cf::boolean(j, "enable_moe_block", false, src.path))
    fail(src.path, ": Gemma 4's MoE block (enable_moe_block) is not supported yet");
  if (cf::boolean(j, "attention_bias", false, src.path))
    fail(src.path, ": attention_bias is not supported for Gemma 4 (its checkpoints have none)");
  if (c.layer_types.empty()) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % 6 ? "sliding_attention" : "full_attention");
  }
  for (const std::string& t : c.layer_types)
    CORVID_CHECK(t == "sliding_attention" || t == "full_attention", src.path, ": layer type '", t,
                 "' is not one of Gemma 4's (sliding_attention, full_attention)");
  // transformers forces the last layer to full attention.
  c.layer_types.back() = "full_attention";
}

Gemma4Params gemma4_params_gguf(const ModelConfig& c, const GgufFile& gg) {
  const std::string p = "gemma4.";
  const int64_t L = c.num_hidden_layers;
  Gemma4Params g;
  g.gguf = true;
  for (const std::string& t : c.layer_types) g.sliding.push_back(t == "sliding_attention");
  int64_t first_full = -1;
  for (int64_t i = 0; i < L && first_full < 0; ++i)
    if (!g.sliding[static_cast<size_t>(i)]) first_full = i;
  CORVID_CHECK(first_full >= 0, gg.path(), ": no full-attention layer (sliding_window_pattern)");
  g.global_head_dim = gg.get_int(p + "attention.key_length");
  CORVID_CHECK(g.global_head_dim > 0 && g.global_head_dim % 2 == 0, gg.path(), ": attention.key_length must be even and positive");
  g.global_kv_heads = gguf_layer_int(gg, p + "attention.head_count_kv", first_full, L, c.num_key_value_heads);
  CORVID_CHECK(g.global_kv_heads > 0 && c.num_attention_heads % g.global_kv_heads == 0, gg.path(),
               ": head_count is not a multiple of the full layers' head_count_kv ", g.global_kv_heads);
  // attention_k_eq_v: the full layers have no value projection.
  g.k_eq_v = gg.find_tensor("blk." + std::to_string(first_full) + ".attn_v.weight") == nullptr;
  g.kv_shared_layers = gg.get_int(p + "attention.shared_kv_layers", 0);
  CORVID_CHECK(g.kv_shared_layers >= 0 && g.kv_shared_layers < L, gg.path(), ": attention.shared_kv_layers ",
               g.kv_shared_layers, " must be below block_count ", L);
  g.double_wide_mlp = gguf_layer_int(gg, p + "feed_forward_length", L - 1, L, c.intermediate_size) == 2 * c.intermediate_size &&
                      g.kv_shared_layers > 0;
  g.per_layer_input = gg.get_int(p + "embedding_length_per_layer_input", 0);
  CORVID_CHECK(g.per_layer_input >= 0, gg.path(), ": embedding_length_per_layer_input must not be negative");
  const GgufTensorInfo* ple = gg.find_tensor("per_layer_token_embd.weight");
  g.per_layer_vocab = ple ? ple->shape[0] : c.vocab_size;
  g.final_softcap = static_cast<float>(gg.get_float(p + "final_logit_softcapping", 0.0));
  g.local = {"default", gg.get_float(p + "rope.freq_base_swa", 10000.0),
             static_cast<double>(gg.get_int(p + "rope.dimension_count_swa", c.head_dim)) / static_cast<double>(c.head_dim),
             1.0, {}};
  // Full layers: every pair over the whole head, each frequency divided by rope_freqs
  // (read at load; 1e30 stops a pair).
  g.global = {"proportional", gg.get_float(p + "rope.freq_base", 1000000.0), 1.0, 1.0, {}};
  CORVID_CHECK(g.local.theta > 0 && g.global.theta > 0 && g.local.partial > 0 && g.local.partial <= 1, gg.path(),
               ": rope.freq_base(_swa) must be positive and rope.dimension_count_swa within the head");
  return g;
}

Gemma4Params gemma4_params(const ModelConfig& c, const FamilySource& src) {
  if (src.gguf) return gemma4_params_gguf(c, *src.gguf);
  const nlohmann::json& j = *src.hf;
  const std::string& s = src.path;
  Gemma4Params g;
  for (const std::string& t : c.layer_types) g.sliding.push_back(t == "sliding_attention");
  g.global_head_dim = cf::integer(j, "global_head_dim", s).value_or(512);
  g.k_eq_v = cf::boolean(j, "attention_k_eq_v", false, s);
  g.global_kv_heads = g.k_eq_v ? cf::integer(j, "num_global_key_value_heads", s).value_or(c.num_key_value_heads)
                               : c.num_key_value_heads;
  g.double_wide_mlp = cf::boolean(j, "use_double_wide_mlp", false, s);
  g.per_layer_input = cf::integer(j, "hidden_size_per_layer_input", s).value_or(256);
  g.per_layer_vocab = cf::integer(j, "vocab_size_per_layer_input", s).value_or(c.vocab_size);
  g.kv_shared_layers = cf::integer(j, "num_kv_shared_layers", s).value_or(0);
  g.final_softcap = static_cast<float>(cf::number(j, "final_logit_softcapping", 0.0, s));
  CORVID_CHECK(g.global_head_dim > 0 && g.global_head_dim % 2 == 0, s, ": global_head_dim must be even and positive");
  CORVID_CHECK(g.global_kv_heads > 0 && c.num_attention_heads % g.global_kv_heads == 0, s,
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_global_key_value_heads ",
               g.global_kv_heads);
  CORVID_CHECK(g.per_layer_input >= 0 && g.per_layer_vocab > 0, s,
               ": hidden_size_per_layer_input and vocab_size_per_layer_input must not be negative");
  CORVID_CHECK(g.kv_shared_layers >= 0 && g.kv_shared_layers < c.num_hidden_layers, s, ": num_kv_shared_layers ",
               g.kv_shared_layers, " must be below num_hidden_layers ", c.num_hidden_layers);
  if (const nlohmann::json* rp = cf::find(j, "rope_parameters")) {
    if (const nlohmann::json* local = cf::find(*rp, "sliding_attention"))
      g.local = parse_rope(*local, s, g.local, "sliding_attention");
    if (const nlohmann::json* global = cf::find(*rp, "full_attention"))
      g.global = parse_rope(*global, s, g.global, "full_attention");
  }
  return g;
}

// RoPE over a head of `dim`: default (every pair rotates) or proportional (the first
// partial · dim / 2 frequencies, over the whole head's denominator; the rest stay put).
ops::RopeParams gemma4_rope(const Gemma4Rope& r, int64_t dim) {
  ops::RopeParams p;
  p.rotary_dim = static_cast<int>(dim);
  const int64_t half = dim / 2;
  const int64_t rotated = r.type == "proportional" ? static_cast<int64_t>(r.partial * static_cast<double>(dim) / 2)
                                                   : static_cast<int64_t>(r.partial * static_cast<double>(half));
  p.inv_freq.assign(static_cast<size_t>(half), 0.0f);
  CORVID_CHECK(r.divisors.empty() || static_cast<int64_t>(r.divisors.size()) == half,
               "Gemma 4: rope_freqs holds ", r.divisors.size(), " factors for heads of ", dim);
  for (int64_t i = 0; i < rotated; ++i) {
    // llama.cpp marks pairs that do not rotate with a divisor of 1e30: frequency 0.
    const double divisor = r.divisors.empty() ? 1.0 : r.divisors[static_cast<size_t>(i)];
    p.inv_freq[static_cast<size_t>(i)] =
        divisor >= 1e20 ? 0.0f
                        : static_cast<float>(1.0 / std::pow(r.theta, static_cast<double>(2 * i) / static_cast<double>(dim)) /
                                             r.factor / divisor);
  }
  return p;
}

class Gemma4 final : public DecoderBase {
 public:
  Gemma4(const ModelConfig& config, const Gemma4Params& g, WeightLoader& w);

  void forward(const Step& step, const Tensor& logits) override;

 private:
  struct Layer {
    SandwichNorms norms;
    layers::Attention attn;
    layers::GatedMlp mlp;
    Tensor ple_gate, ple_projection, ple_norm;  // PLE: [P, H], [H, P], [H]
    float scalar = 1.0f;
  };

  Tensor embed_tokens_;
  float embed_scale_ = 1.0f;
  // PLE: the second table [per_layer_vocab, L·P], the projection [L·P, H] and its norm [P].
  Tensor ple_table_, ple_model_projection_, ple_projection_norm_;
  int64_t ple_ = 0;
  DeviceTensor ple_inputs_, ple_tokens_, ple_one_;  // [n, L·P], [n, L·P], [n, P]
  int64_t ple_rows_ = 0;
  std::vector<Layer> layers_;
  layers::OutputHead head_;
};

Gemma4::Gemma4(const ModelConfig& config, const Gemma4Params& params, WeightLoader& w)
    : DecoderBase(config, w.device()) {
  const ModelConfig& c = config_;
  Gemma4Params g = params;
  if (g.gguf && w.has("rope_freqs.weight")) g.global.divisors = w.read_f32("rope_freqs.weight", g.global_head_dim / 2);
  check_gemma_geometry(c, w.source(), "Gemma 4");
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const float eps = static_cast<float>(c.rms_norm_eps);
  embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(H)));
  embed_tokens_ = w.get("model.embed_tokens.weight", {c.vocab_size, H}, WeightRole::Embedding);
  head_ = layers::load_output_head(w, embed_tokens_, c.vocab_size, H, eps, c.tie_word_embeddings, false);
  head_.softcap = g.final_softcap;
  ple_ = g.per_layer_input;
  if (ple_ > 0) {
    ple_table_ = w.get("model.embed_tokens_per_layer.weight", {g.per_layer_vocab, L * ple_}, WeightRole::Embedding);
    ple_model_projection_ = w.get("model.per_layer_model_projection.weight", {L * ple_, H});
    ple_projection_norm_ = w.norm("model.per_layer_projection_norm.weight", ple_);
  }
  const Tensor v_norm = w.ones(std::max(c.head_dim, g.global_head_dim));
  // A KV-shared layer reads the last layer of its type before the first shared one.
  const int64_t first_shared = L - g.kv_shared_layers;
  int64_t last_local = -1, last_global = -1;
  for (int64_t i = 0; i < first_shared; ++i) (g.sliding[static_cast<size_t>(i)] ? last_local : last_global) = i;
  int64_t widest_q = 0, widest_kv = 0, widest_ffn = 0;
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const bool sliding = g.sliding[static_cast<size_t>(i)], shared = i >= first_shared;
    Layer Ly;
    Ly.norms = load_sandwich_norms(w, p, H, false);
    layers::Attention& a = Ly.attn = layers::attention_geometry(c, i);
    if (!sliding) a.head_dim = g.global_head_dim, a.kv_heads = g.global_kv_heads;
    a.scale = 1.0f;
    a.qk_norm = layers::QkNorm::PerHead;
    a.rope = gemma4_rope(sliding ? g.local : g.global, a.head_dim);
    a.window = sliding ? *c.sliding_window : 0;
    a.v_from_k = g.k_eq_v && !sliding;
    a.shares_kv = shared;
    a.v_norm = Tensor(DType::F32, {a.head_dim}, v_norm.data, v_norm.device);
    load_attention(w, p + "self_attn.", H, {}, a);
    const int64_t ffn = shared && g.double_wide_mlp ? 2 * I : I;
    load_gated_mlp(w, p + "mlp.", H, ffn, false, layers::Activation::GeluTanh, Ly.mlp);
    if (ple_ > 0) {
      Ly.ple_gate = w.get(p + "per_layer_input_gate.weight", {ple_, H});
      Ly.ple_projection = w.get(p + "per_layer_projection.weight", {H, ple_});
      Ly.ple_norm = w.norm(p + "post_per_layer_input_norm.weight", H);
    }
    // (llama.cpp's loader takes layer_output_scale as optional: 1 without it.)
    Ly.scalar = g.gguf && !w.has(p + "layer_scalar") ? 1.0f : w.read_f32(p + "layer_scalar", 1)[0];
    if (shared) {
      const int64_t source = sliding ? last_local : last_global;
      CORVID_CHECK(source >= 0, w.source(), ": KV-shared layer ", i, " has no earlier ",
                   sliding ? "sliding" : "full", " layer to read");
      state_.push_back({StateKind::SharedKV, a.kv_heads, a.head_dim, a.window, source});
    } else {
      state_.push_back(a.state());
    }
    widest_q = std::max(widest_q, a.heads * a.head_dim);
    widest_kv = std::max(widest_kv, a.kv_heads * a.head_dim);
    widest_ffn = std::max(widest_ffn, ffn);
    layers_.push_back(std::move(Ly));
  }
  check_state_spec(state_);
  storage_ = w.finish();
  bytes_per_token_ = layers::weight_bytes({&head_.norm, &head_.lm_head, &ple_model_projection_, &ple_projection_norm_});
  for (const Layer& Ly : layers_)
    bytes_per_token_ += Ly.attn.weight_bytes() + Ly.mlp.weight_bytes() + Ly.norms.weight_bytes() +
                        layers::weight_bytes({&Ly.ple_gate, &Ly.ple_projection, &Ly.ple_norm});
  scratch_.dims = {H, widest_q, widest_kv, std::max(widest_ffn, ple_)};
}

void Gemma4::forward(const Step& step, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(step.tokens.size()), L = static_cast<int64_t>(layers_.size());
  const float eps = static_cast<float>(config_.rms_norm_eps);
  scratch_.ensure(n);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  ops::embedding(embed_tokens_, step.tokens, x);
  ops::scale(x, embed_scale_);
  Tensor ple_inputs, ple_one;
  if (ple_ > 0) {
    if (ple_rows_ < n) {
      ple_rows_ = n;
      ple_inputs_ = DeviceTensor(device_, DType::F32, {n, L * ple_});
      ple_tokens_ = DeviceTensor(device_, DType::F32, {n, L * ple_});
      ple_one_ = DeviceTensor(device_, DType::F32, {n, ple_});
      ++scratch_.generation;  // a recorded step holds these addresses too
    }
    // (projection(x) · H^-½, normed per layer slice, + table[ids] · P^½) · 2^-½
    ple_inputs = ple_inputs_.rows(n);
    const Tensor tokens = ple_tokens_.rows(n);
    ple_one = ple_one_.rows(n);
    ops::matmul(x, ple_model_projection_, ple_inputs);
    ops::scale(ple_inputs, static_cast<float>(1.0 / std::sqrt(static_cast<double>(config_.hidden_size))));
    const Tensor per_layer = ple_inputs.reshaped({n * L, ple_});
    ops::rms_norm(per_layer, ple_projection_norm_, eps, per_layer);
    ops::embedding(ple_table_, step.tokens, tokens);
    ops::scale(tokens, static_cast<float>(std::sqrt(static_cast<double>(ple_))));
    ops::add(ple_inputs, tokens);
    ops::scale(ple_inputs, static_cast<float>(std::sqrt(0.5)));
  }
  for (int64_t i = 0; i < L; ++i) {
    const Layer& Ly = layers_[static_cast<size_t>(i)];
    ops::rms_norm(x, Ly.norms.input, eps, h);
    Ly.attn.forward(h, step, scratch_, h);
    ops::rms_norm(h, Ly.norms.post_attention, eps, h);
    ops::add_rms_norm(x, h, Ly.norms.pre_feedforward, eps, h);
    Ly.mlp.forward(h, scratch_, h);
    ops::rms_norm(h, Ly.norms.post_feedforward, eps, h);
    ops::add(x, h);
    if (ple_ > 0) {
      // x += norm(projection(gelu_tanh(gate(x)) · per_layer_input[i]))
      const Tensor gate = layers::rows_of(scratch_.gate, n, ple_);
      ops::matmul(x, Ly.ple_gate, gate);
      ops::gather_columns(ple_inputs, i * ple_, ple_one);
      ops::gelu_tanh_mul(gate, ple_one, gate);
      ops::matmul(gate, Ly.ple_projection, h);
      ops::rms_norm(h, Ly.ple_norm, eps, h);
      ops::add(x, h);
    }
    if (Ly.scalar != 1.0f) ops::scale(x, Ly.scalar);
  }
  head_.forward(x, step.out_rows, scratch_, logits, step.output);
}

// llama.cpp's gemma4 names where they differ from the shared ones.
const GgufName kGemma4Names[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "model.per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"},
};

}  // namespace

Family gemma4_family() {
  return {"gemma4",
          {"gemma4_text"},
          {"gemma4"},
          gemma_defaults,
          configure_gemma4,
          kGemma4Names,
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) -> std::unique_ptr<Model> {
            return std::make_unique<Gemma4>(c, gemma4_params(c, src), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical) (gemma4, gemma4_nople, "
          "gemma4_shared, gemma4_wide, gemma4_mm; gemma4_gguf in llama.cpp's GGUF layout); no real weights checked yet",
          [](ModelProfile& p, const ModelConfig& c, const FamilySource& src) {
            const Gemma4Params g = gemma4_params(c, src);
            p.max_head_dim = std::max(c.head_dim, g.global_head_dim);
            p.sliding_window = true;
            p.shared_kv = g.kv_shared_layers > 0;
          }};
}

}  // namespace corvid
