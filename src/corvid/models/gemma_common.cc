#include "corvid/models/gemma_common.h"

#include "corvid/core/error.h"
#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/output.h"

namespace corvid {

// Gemma 3's and Gemma 4's transformers config classes have the same defaults for these.
ConfigDefaults gemma_defaults(const std::string&) {
  ConfigDefaults d;
  d.num_key_value_heads = 4;
  d.head_dim = 256;
  d.max_position_embeddings = 131072;
  d.bos = {2};
  d.eos = {1};
  d.rms_norm_eps = 1e-6;
  d.hidden_act = "gelu_pytorch_tanh";
  d.tie_word_embeddings = true;
  return d;
}

void check_gemma_geometry(const ModelConfig& c, const std::string& source, const char* family) {
  CORVID_CHECK(layers::parse_activation(c.hidden_act, source) == layers::Activation::GeluTanh, source, ": ", family,
               " uses gelu_pytorch_tanh, not ", c.hidden_act);
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, source,
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
               c.num_key_value_heads);
}

int64_t SandwichNorms::weight_bytes() const {
  return layers::weight_bytes({&input, &post_attention, &pre_feedforward, &post_feedforward});
}

SandwichNorms load_sandwich_norms(WeightLoader& w, const std::string& p, int64_t hidden, bool plus_one) {
  return {w.norm(p + "input_layernorm.weight", hidden, plus_one),
          w.norm(p + "post_attention_layernorm.weight", hidden, plus_one),
          w.norm(p + "pre_feedforward_layernorm.weight", hidden, plus_one),
          w.norm(p + "post_feedforward_layernorm.weight", hidden, plus_one)};
}

}  // namespace corvid
