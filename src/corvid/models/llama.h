// The Llama-family decoder (llama, mistral, qwen2, qwen3, SmolLM2), written once
// against ops::. Differences between the families are config flags: q/k/v
// biases (qwen2), per-head q/k RMSNorm (qwen3), sliding-window attention
// (mistral), tied embeddings, RoPE layout and scaling.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/ops/ops.h"

namespace corvid {

class LlamaModel {
 public:
  // Binds the weights (views; `weights` must outlive the model) and checks every
  // tensor's presence and shape against the config.
  LlamaModel(const ModelConfig& config, const WeightSet& weights);

  const ModelConfig& config() const { return config_; }

  // Runs `tokens` at `positions` (same length), writing their keys and values into
  // `kv` at those positions; earlier positions must already be in `kv`.
  // logits: [n, vocab] when all_logits, else [1, vocab] for the last token (F32).
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
               const Tensor& logits, bool all_logits);

  // Bytes of weights one decode step reads (everything but the embedding table,
  // unless it doubles as the output matrix), for bandwidth figures.
  int64_t weight_bytes_per_token() const;
  int64_t parameter_count() const;

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    Tensor q_proj, k_proj, v_proj, o_proj;
    const Tensor *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;
    const Tensor *q_norm = nullptr, *k_norm = nullptr;
    Tensor gate_proj, up_proj, down_proj;
  };
  struct Workspace {
    int64_t tokens = 0;
    OwnedTensor x, h, q, k, v, attn, gate, up;
  };

  void apply_rope_freq_factors(const WeightSet& weights);
  void ensure_workspace(int64_t n);
  void attention_block(const Layer& layer, int64_t index, std::span<const int32_t> positions, KVCache& kv, int64_t n);
  void mlp_block(const Layer& layer, int64_t n);

  ModelConfig config_;
  const WeightSet& weights_;
  ops::RopeParams rope_;
  Tensor embed_tokens_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  Workspace ws_;
};

}  // namespace corvid
