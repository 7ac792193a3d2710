// What the Gemma families (gemma3.cc, gemma4.cc) share: their config classes'
// defaults, the geometry both require, and the sandwich norms around each layer's
// attention and MLP (x += post_attn(attn(in(x))); x += post_ffw(mlp(pre_ffw(x)))).
#pragma once

#include <cstdint>
#include <string>

#include "corvid/formats/model_config.h"
#include "corvid/models/weight_loader.h"

namespace corvid {

ConfigDefaults gemma_defaults(const std::string& model_type);

// Throws, naming `source`, unless the MLP is GeGLU with the tanh GELU and the query
// heads are a multiple of the KV heads.
void check_gemma_geometry(const ModelConfig& config, const std::string& source, const char* family);

struct SandwichNorms {
  Tensor input, post_attention, pre_feedforward, post_feedforward;  // [hidden] each
  int64_t weight_bytes() const;
};

// input_layernorm, post_attention_layernorm, pre_feedforward_layernorm and
// post_feedforward_layernorm under `prefix` ("model.layers.3."); plus_one: stored w of (1 + w).
SandwichNorms load_sandwich_norms(WeightLoader& w, const std::string& prefix, int64_t hidden, bool plus_one);

}  // namespace corvid
