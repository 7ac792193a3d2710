// Granite (IBM Granite 3.x dense): the Llama skeleton with four multipliers —
// embeddings × embedding_multiplier, each block's output × residual_multiplier
// before its residual add, scores × attention_multiplier (instead of 1/sqrt(d)),
// logits ÷ logits_scaling. GGUF granite stores them as granite.embedding_scale,
// residual_scale, attention.scale and logit_scale.
#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/prenorm_decoder.h"

namespace corvid {

namespace {

ConfigDefaults granite_defaults(const std::string&) {
  ConfigDefaults d;
  d.max_position_embeddings = 2048;
  d.bos = {1};
  d.eos = {2};
  return d;
}

void configure_granite(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    c.rope_interleaved = true;  // converted as a llama: q/k rows permuted for adjacent pairs
    c.attention_bias = src.gguf->find_tensor("blk.0.attn_q.bias") != nullptr;
    c.mlp_bias = src.gguf->find_tensor("blk.0.ffn_gate.bias") != nullptr;
    return;
  }
  c.attention_bias = config_fields::boolean(*src.hf, "attention_bias", false, src.path);
  c.mlp_bias = config_fields::boolean(*src.hf, "mlp_bias", false, src.path);
}

PreNormSpec granite_spec(const ModelConfig& c, const FamilySource& src) {
  PreNormSpec spec;
  spec.qkv_bias = spec.o_bias = c.attention_bias;
  spec.mlp_bias = c.mlp_bias;
  double embedding = 1, residual = 1, attention = 1, logits = 1;
  if (src.gguf) {
    const std::string p = c.architecture + ".";
    embedding = src.gguf->get_float(p + "embedding_scale", 1.0);
    residual = src.gguf->get_float(p + "residual_scale", 1.0);
    attention = src.gguf->get_float(p + "attention.scale", 1.0);
    logits = src.gguf->get_float(p + "logit_scale", 1.0);
  } else {
    embedding = config_fields::number(*src.hf, "embedding_multiplier", 1.0, src.path);
    residual = config_fields::number(*src.hf, "residual_multiplier", 1.0, src.path);
    attention = config_fields::number(*src.hf, "attention_multiplier", 1.0, src.path);
    logits = config_fields::number(*src.hf, "logits_scaling", 1.0, src.path);
  }
  CORVID_CHECK(logits != 0, src.path, ": logits_scaling must not be 0");
  spec.embedding_scale = static_cast<float>(embedding);
  spec.residual_scale = static_cast<float>(residual);
  spec.attention_scale = static_cast<float>(attention);
  spec.logit_scale = static_cast<float>(1.0 / logits);
  return spec;
}

}  // namespace

Family granite_family() {
  return {"granite", {"granite"}, {"granite"}, granite_defaults, configure_granite, {},
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) {
            return make_prenorm_decoder(c, granite_spec(c, src), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical)"};
}

}  // namespace corvid
