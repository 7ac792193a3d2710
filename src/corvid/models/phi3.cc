// Phi-3: the Llama skeleton with q|k|v and gate|up each stored as one matrix
// (self_attn.qkv_proj, mlp.gate_up_proj; GGUF attn_qkv and ffn_up), a sliding window
// on every layer when the config sets one, partial rotary, and longrope (su) scaling
// from config.json or, in a GGUF, as llama.cpp writes it: the factors as the global
// tensors rope_factors_long / rope_factors_short, the pretraining context as
// rope.scaling.original_context_length, the attention factor as rope.scaling.attn_factor
// (models/rope_scaling.h: which factors apply).
#include <cmath>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/prenorm_decoder.h"

namespace corvid {

namespace {

ConfigDefaults phi3_defaults(const std::string&) {
  ConfigDefaults d;
  d.max_position_embeddings = 4096;
  d.bos = {1};
  d.eos = {32000};
  d.rms_norm_eps = 1e-5;
  return d;
}

// The rotary_dim / 2 F32 values of one of llama.cpp's longrope factor tensors.
std::vector<double> gguf_factors(const GgufFile& g, const char* name, int64_t count) {
  const GgufTensorInfo* t = g.find_tensor(name);
  CORVID_CHECK(t, g.path(), ": longrope needs both rope_factors_long and rope_factors_short (", name, " is missing)");
  CORVID_CHECK(t->view.dtype == DType::F32 && t->view.numel() == count, g.path(), ": ", name, " must hold ", count,
               " F32 values (rope.dimension_count / 2)");
  const float* f = t->view.ptr<float>();
  std::vector<double> out(f, f + count);
  for (double x : out) CORVID_CHECK(x > 0 && std::isfinite(x), g.path(), ": ", name, " holds ", x, " (need positive)");
  return out;
}

void gguf_longrope(ModelConfig& c, const GgufFile& g) {
  const std::string p = c.architecture + ".";
  RopeScaling& s = c.rope_scaling;
  s = RopeScaling{};
  s.type = RopeScaling::Type::LongRope;
  s.factor = 0;  // max / original context
  s.long_factor = gguf_factors(g, "rope_factors_long.weight", c.rotary_dim / 2);
  s.short_factor = gguf_factors(g, "rope_factors_short.weight", c.rotary_dim / 2);
  s.original_max_position_embeddings = g.get_int(p + "rope.scaling.original_context_length");
  CORVID_CHECK(s.original_max_position_embeddings > 0, g.path(), ": rope.scaling.original_context_length must be positive");
  if (g.has(p + "rope.scaling.attn_factor")) s.attention_factor = g.get_float(p + "rope.scaling.attn_factor");
}

void configure_phi3(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    c.sliding_window = src.gguf->get_int(c.architecture + ".attention.sliding_window", 0);
    if (*c.sliding_window == 0) c.sliding_window.reset();
    if (src.gguf->find_tensor("rope_factors_long.weight") || src.gguf->find_tensor("rope_factors_short.weight"))
      gguf_longrope(c, *src.gguf);
    return;
  }
  const nlohmann::json& j = *src.hf;
  CORVID_CHECK(!config_fields::boolean(j, "attention_bias", false, src.path), src.path,
               ": Phi-3 with attention_bias is not supported");
  c.sliding_window = config_fields::integer(j, "sliding_window", src.path);
  if (c.sliding_window) CORVID_CHECK(*c.sliding_window > 0, src.path, ": sliding_window must be positive");
}

PreNormSpec phi3_spec(const ModelConfig& c) {
  PreNormSpec spec;
  spec.fused_checkpoint = true;
  if (c.sliding_window) spec.window.assign(static_cast<size_t>(c.num_hidden_layers), *c.sliding_window);
  return spec;
}

// llama.cpp's phi3: q|k|v in attn_qkv, gate|up in ffn_up.
const GgufName kPhi3Names[] = {
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"ffn_up.weight", "mlp.gate_up_proj.weight"},
};

}  // namespace

Family phi3_family() {
  return {"phi3", {"phi3"}, {"phi3"}, phi3_defaults, configure_phi3, kPhi3Names,
          [](const ModelConfig& c, const FamilySource&, WeightLoader& w) {
            // GGUF longrope's factors were read into the config (configure_phi3).
            w.ignore("rope_factors_long.weight");
            w.ignore("rope_factors_short.weight");
            return make_prenorm_decoder(c, phi3_spec(c), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical) (phi3, phi3_longrope); longrope's factors are fixed per model, "
          "where transformers switches them per call (models/rope_scaling.h)"};
}

}  // namespace corvid
