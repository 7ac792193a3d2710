// OutputHead: the final norm and the output matrix over the rows a step wants
// logits for, then the family's logit transforms (Granite's divisor, Gemma's
// soft-capping).
#pragma once

#include <cstdint>
#include <span>

#include "corvid/models/layers/scratch.h"
#include "corvid/models/model.h"
#include "corvid/models/weight_loader.h"

namespace corvid::layers {

struct OutputHead {
  Tensor norm, lm_head;  // lm_head may be the embedding table (tied)
  float eps = 1e-6f;
  float logit_scale = 1.0f;  // logits *= this
  float softcap = 0.0f;      // > 0: logits = softcap * tanh(logits / softcap)

  // x [n, hidden]: the last layer's output (its rows may be overwritten). `out` gets the
  // rows asked for, in order: logits [rows.size(), vocab], or with StepOutput::Hidden the
  // normed rows themselves [rows.size(), hidden] (no output matrix, no logit transforms).
  void forward(const Tensor& x, std::span<const int64_t> rows, Scratch& scratch, const Tensor& out,
               StepOutput output = StepOutput::Logits) const;
};

// The final norm (model.norm.weight; `plus_one` for (1 + w) norms) and the output matrix:
// lm_head.weight, or the embedding table when the checkpoint ties them (a missing
// lm_head of an untied config is an error naming the file).
OutputHead load_output_head(WeightLoader& w, const Tensor& embed_tokens, int64_t vocab, int64_t hidden, float eps,
                            bool tied, bool plus_one = false);

// Bytes of the given weights (absent ones count 0): what a decode step reads.
int64_t weight_bytes(std::initializer_list<const Tensor*> weights);

}  // namespace corvid::layers
