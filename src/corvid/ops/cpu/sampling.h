// The CPU implementation of token sampling (ops/sampling.h), shared with the
// engine's host Sampler so that one filtering code serves both: penalties from
// the sparse list, then pick_token's temperature / top-k / top-p / min-p / draw.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "corvid/ops/sampling.h"

namespace corvid::ops::cpu {

// The order in which the draw walks the kept tokens: the Sampler's historical
// descending-probability order, or token-id order as the GPU walks.
enum class DrawOrder { Descending, TokenId };

// Buffers reused between calls.
struct SamplingScratch {
  std::vector<std::pair<float, int32_t>> candidates;
  std::vector<double> probs;
  std::vector<std::pair<int32_t, double>> by_id;
};

// Applies p's penalties to logits in place (penalty ids must lie in the row).
void apply_penalties(std::span<float> logits, const TokenSampling& p);

// The token for already penalised logits (rewritten: scaled by the temperature),
// drawing with p.uniform.
int32_t pick_token(std::span<float> logits, const TokenSampling& p, DrawOrder order, SamplingScratch& scratch);

// ops::sample_tokens for CPU logits (arguments already checked).
void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out);

}  // namespace corvid::ops::cpu
