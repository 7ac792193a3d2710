// PreNormDecoder: the Llama skeleton that several families share —
//   x = embed(tokens) * embedding_scale
//   per layer: x += residual_scale * attn(norm(x)); x += residual_scale * mlp(norm(x))
//   logits = lm_head(norm(x)) * logit_scale
// with per-layer RoPE (or none: NoPE) and windows. Llama, Mistral, Qwen2/3 (llama.cc),
// Granite (granite.cc), SmolLM3 (smollm3.cc) and Phi-3 (phi3.cc) are this skeleton with
// their own config fields and tensor names; each family file says which. Qwen2-MoE and
// Qwen3-MoE (qwen_moe.cc) replace the MLP of their sparse layers with a MoE block.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "corvid/models/layers/moe.h"
#include "corvid/models/model.h"
#include "corvid/models/weight_loader.h"

namespace corvid {

struct PreNormSpec {
  float embedding_scale = 1.0f, residual_scale = 1.0f, logit_scale = 1.0f;
  std::optional<float> attention_scale;  // unset: 1 / sqrt(head_dim)
  std::vector<bool> rope;                // per layer; false: no positional encoding (empty: all)
  std::vector<int64_t> window;           // per layer sliding window, 0: none (empty: none)
  bool qkv_bias = false, o_bias = false, mlp_bias = false, qk_norm = false;
  // Phi-3's checkpoint layout: self_attn.qkv_proj and mlp.gate_up_proj, one matrix each.
  bool fused_checkpoint = false;
  // Sparse layers (Qwen2/3-MoE): where sparse[i], layer i's MLP is the MoE block `moe`.
  std::vector<bool> sparse;  // per layer (empty: all dense)
  layers::MoeShape moe;
};

std::unique_ptr<Model> make_prenorm_decoder(const ModelConfig& config, const PreNormSpec& spec, WeightLoader& w);

}  // namespace corvid
