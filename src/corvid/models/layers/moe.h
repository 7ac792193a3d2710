// MoeBlock: a sparse mixture-of-experts MLP (transformers' Qwen3MoeSparseMoeBlock and
// Qwen2MoeSparseMoeBlock): a router [E, H] picks top_k experts per token
// (ops::moe_route), the routed experts' gated MLPs are summed with the router's
// weights (ops::moe_experts), and an optional shared expert, a dense gated MLP, is
// added through its sigmoid gate [1, H] (Qwen2-MoE, Qwen3-Next).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corvid/models/layers/mlp.h"
#include "corvid/models/layers/scratch.h"
#include "corvid/models/weight_loader.h"
#include "corvid/ops/moe.h"

namespace corvid::layers {

struct MoeShape {
  int64_t experts = 0, top_k = 0, ffn = 0;  // num_experts, num_experts_per_tok, moe_intermediate_size
  bool norm_topk = false;                   // norm_topk_prob
  int64_t shared_ffn = 0;                   // shared_expert_intermediate_size (0: no shared expert)
  Activation act = Activation::Silu;
};

struct MoeBlock {
  MoeShape shape;
  Tensor router;  // [E, H]
  ops::Experts experts;
  GatedMlp shared;     // when shape.shared_ffn > 0
  Tensor shared_gate;  // [1, H]

  // h [n, hidden] (may be `out`) → out [n, hidden].
  void forward(const Tensor& h, Scratch& scratch, const Tensor& out) const;
  // Bytes of the weights one token reads: the router, top_k experts, the shared expert.
  int64_t active_weight_bytes() const;
  // Parameters of the experts a token's router leaves out (experts - top_k of them).
  int64_t inactive_parameters() const;
  // Bytes of all its routed experts (what --moe-offload keeps in host memory).
  int64_t routed_expert_bytes() const;
};

// Throws naming `source` unless 1 <= top_k <= min(experts, 64), experts <= 1024 (what
// ops::moe_route takes), ffn > 0 and shared_ffn >= 0.
void check_moe_shape(const MoeShape& shape, const std::string& source);

// The block under `prefix` ("model.layers.3.mlp."): gate.weight (the router), the
// experts as transformers 5 fuses them (experts.gate_up_proj [E, 2I, H] and
// experts.down_proj [E, H, I]) or per expert (experts.{e}.{gate,up,down}_proj.weight,
// stacked), or as GGUF stores them (experts.{gate,up,down}_proj [E, rows, cols]: the
// names formats/gguf_model.cc gives ffn_*_exps), and shared_expert.* with
// shared_expert_gate.weight. The routed experts go where `experts_at` says (host-mapped:
// offloaded); the router and the shared expert stay on the device.
void load_moe(WeightLoader& w, const std::string& prefix, int64_t hidden, const MoeShape& shape, MoeBlock& m,
              Residency experts_at = Residency::Device);

// Gives every block in `offloaded` (MoE layers whose routed experts load_moe put in
// host memory) one shared device staging buffer (ops::Experts::staging), sized for the
// largest of them, so prompt-sized GPU steps copy a layer's experts over once instead
// of reading them across the link piece by piece. Nothing on the CPU or when empty.
void share_expert_staging(WeightLoader& w, const std::vector<MoeBlock*>& offloaded);

}  // namespace corvid::layers
