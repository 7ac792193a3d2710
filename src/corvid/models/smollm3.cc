// SmolLM3: the Llama skeleton with NoPE layers — no_rope_layers[i] is 1 where layer i
// rotates q and k, 0 where it uses no positional encoding (default: every
// no_rope_layer_interval-th layer, 4, is NoPE) — and, with use_sliding_window, a window
// on the layers layer_types marks sliding.
//
// From GGUF (general.architecture smollm3): llama.cpp's converter writes llama's keys
// and permutes q/k rows as it does for llama, and stores no NoPE pattern: its loader
// fixes every 4th layer as NoPE (the released models' no_rope_layer_interval), so that
// is what a GGUF means here too.
#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/prenorm_decoder.h"

namespace corvid {

namespace {

ConfigDefaults smollm3_defaults(const std::string&) {
  ConfigDefaults d;
  d.num_key_value_heads = 4;
  d.max_position_embeddings = 32768;
  d.bos = {128000};
  d.eos = {128001};
  d.tie_word_embeddings = true;
  return d;
}

void configure_smollm3(ModelConfig& c, const FamilySource& src) {
  if (src.gguf) {
    c.rope_interleaved = true;  // q/k rows permuted by the converter (adjacent pairs rotate)
    for (const char* bias : {"blk.0.attn_q.bias", "blk.0.attn_output.bias", "blk.0.ffn_gate.bias"})
      CORVID_CHECK(!src.gguf->find_tensor(bias), src.path, ": SmolLM3 from GGUF has no biases (", bias, ")");
    return;
  }
  const nlohmann::json& j = *src.hf;
  c.attention_bias = config_fields::boolean(j, "attention_bias", false, src.path);
  c.mlp_bias = config_fields::boolean(j, "mlp_bias", false, src.path);
  if (config_fields::boolean(j, "use_sliding_window", false, src.path)) {
    c.sliding_window = config_fields::integer(j, "sliding_window", src.path);
    CORVID_CHECK(c.sliding_window && *c.sliding_window > 0, src.path,
                 ": use_sliding_window needs a positive sliding_window");
  }
}

PreNormSpec smollm3_spec(const ModelConfig& c, const FamilySource& src) {
  const int64_t L = c.num_hidden_layers;
  PreNormSpec spec;
  spec.qkv_bias = spec.o_bias = c.attention_bias;
  spec.mlp_bias = c.mlp_bias;
  std::vector<int64_t> uses_rope;
  if (src.gguf) {
    for (int64_t i = 0; i < L; ++i) uses_rope.push_back((i + 1) % 4 != 0 ? 1 : 0);  // llama.cpp's fixed pattern
  } else if (auto given = config_fields::integers(*src.hf, "no_rope_layers", L, src.path)) {
    uses_rope = *given;
  } else {
    const int64_t interval = config_fields::integer(*src.hf, "no_rope_layer_interval", src.path).value_or(4);
    CORVID_CHECK(interval > 0, src.path, ": no_rope_layer_interval must be positive");
    for (int64_t i = 0; i < L; ++i) uses_rope.push_back((i + 1) % interval != 0 ? 1 : 0);
  }
  for (int64_t i = 0; i < L; ++i) {
    const int64_t r = uses_rope[static_cast<size_t>(i)];
    CORVID_CHECK(r == 0 || r == 1, src.path, ": no_rope_layers holds ", r, " (0 or 1 per layer)");
    spec.rope.push_back(r == 1);
    // transformers' default layer_types slide the NoPE layers when sliding is on.
    bool sliding = false;
    if (c.sliding_window)
      sliding = c.layer_types.empty() ? r == 0 : c.layer_types[static_cast<size_t>(i)] == "sliding_attention";
    spec.window.push_back(sliding ? *c.sliding_window : 0);
  }
  return spec;
}

}  // namespace

Family smollm3_family() {
  return {"smollm3", {"smollm3"}, {"smollm3"}, smollm3_defaults, configure_smollm3, {},
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) {
            return make_prenorm_decoder(c, smollm3_spec(c, src), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical) (smollm3, "
          "smollm3_interval; smollm3_gguf in llama.cpp's GGUF layout)"};
}

}  // namespace corvid
