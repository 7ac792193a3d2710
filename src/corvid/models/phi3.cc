// Phi-3: the Llama skeleton with q|k|v and gate|up each stored as one matrix
// (self_attn.qkv_proj, mlp.gate_up_proj; GGUF attn_qkv and ffn_up), a sliding window
// on every layer when the config sets one, partial rotary, and longrope (su) scaling
// from config.json (models/rope_scaling.h: which factors apply). GGUF longrope
// (rope_factors_long/short tensors) is not read yet and is refused.
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

void configure_phi3(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    c.sliding_window = src.gguf->get_int(c.architecture + ".attention.sliding_window", 0);
    if (*c.sliding_window == 0) c.sliding_window.reset();
    CORVID_CHECK(!src.gguf->find_tensor("rope_factors_long.weight"), src.path,
                 ": longrope scaling (rope_factors_long/short) is not supported yet");
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
            return make_prenorm_decoder(c, phi3_spec(c), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical) (phi3, phi3_longrope); longrope's factors are fixed per model, "
          "where transformers switches them per call (models/rope_scaling.h)"};
}

}  // namespace corvid
