// OutputHead: the final norm and the output matrix over the rows a step wants
// logits for, then the family's logit transforms (Granite's divisor, Gemma's
// soft-capping).
#pragma once

#include <cstdint>
#include <span>

#include "corvid/models/layers/scratch.h"

namespace corvid::layers {

struct OutputHead {
  Tensor norm, lm_head;  // lm_head may be the embedding table (tied)
  float eps = 1e-6f;
  float logit_scale = 1.0f;  // logits *= this
  float softcap = 0.0f;      // > 0: logits = softcap * tanh(logits / softcap)

  // x [n, hidden]: the last layer's output (its rows may be overwritten). logits
  // [rows.size(), vocab] get the rows asked for, in order.
  void forward(const Tensor& x, std::span<const int64_t> rows, Scratch& scratch, const Tensor& logits) const;
};

}  // namespace corvid::layers
