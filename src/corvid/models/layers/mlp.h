// GatedMlp: down(act(gate(x)) * up(x)) with SiLU (SwiGLU) or tanh-GELU (GeGLU),
// optional biases. A single token without biases runs gate|up as one GEMV that ends
// in the activation times up (ops::matmul_glu) when the two lie back to back.
#pragma once

#include <cstdint>
#include <string>

#include "corvid/models/layers/scratch.h"
#include "corvid/models/weight_loader.h"

namespace corvid::layers {

enum class Activation { Silu, GeluTanh };

// config.json's hidden_act / hidden_activation → Activation; throws naming `source`.
Activation parse_activation(const std::string& name, const std::string& source);

struct GatedMlp {
  Activation act = Activation::Silu;
  int64_t ffn = 0;
  Tensor gate_proj, up_proj, down_proj;
  Tensor gate_bias, up_bias, down_bias;  // empty when absent
  Tensor gate_up_proj;                   // gate|up as one matrix when back to back, else empty

  // h [n, hidden] (may be `out`) → out [n, hidden].
  void forward(const Tensor& h, Scratch& scratch, const Tensor& out) const;
  // Bytes of its weights (what a decode step reads).
  int64_t weight_bytes() const;
};

// gate_proj / up_proj / down_proj (.weight, and .bias when `bias`) under `prefix`
// ("model.layers.3.mlp."), gate|up asked for back to back unless biased.
void load_gated_mlp(WeightLoader& w, const std::string& prefix, int64_t hidden, int64_t ffn, bool bias,
                    Activation act, GatedMlp& m);

}  // namespace corvid::layers
