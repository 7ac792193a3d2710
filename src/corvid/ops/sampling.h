// Token sampling as an op: one token per logits row, on the device the logits are
// on, so a GPU step copies back token ids instead of whole rows.
//
// Semantics (the CPU Sampler's, engine/sampler.h): penalties, then temperature 0 =
// argmax (the lowest id wins a tie); otherwise logits / temperature, top-k (ties at
// the k-th value go to the lower ids), softmax over the survivors, top-p (the
// smallest prefix, in descending order, whose mass reaches top_p; at least one
// token), min-p (drop tokens below min_p × the top probability), then a draw. NaN
// logits are skipped; a row of only NaN is an Error.
//
// The random number is drawn on the host (the request's seeded RNG) and passed in
// as `uniform`; the op turns it into a token by inverse CDF over the kept tokens,
// walked in token-id order on every backend (the same distribution as the CPU
// Sampler's walk in descending order, not the same token for the same number).
// So a seed reproduces on one device and no device RNG state exists.
#pragma once

#include <cstdint>
#include <span>

#include "corvid/core/tensor.h"

namespace corvid::ops {

// One logits row's parameters (ranges as SamplingParams).
struct TokenSampling {
  float temperature = 0.0f;
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // applied once to each of penalty_ids
  float presence_penalty = 0.0f;    // applied to penalty_ids with output_counts > 0
  float frequency_penalty = 0.0f;   // × output_counts
  // The sparse form of the sequence for the penalties: distinct token ids (those of the
  // prompt and the output when repetition_penalty != 1, else at least the output's) and
  // how often each occurs in the output (0: prompt only). Equal lengths.
  std::span<const int32_t> penalty_ids;
  std::span<const int32_t> output_counts;
  double uniform = 0.0;  // in [0, 1): the draw (unused when temperature is 0)
};

// Throws corvid::Error naming the parameter when a value of p is out of range (the
// penalty lists are checked by sample_tokens, which knows the vocabulary).
void check_sampling_params(const TokenSampling& p);

// out[r] = the token sampled from logits row r with rows[r]. logits F32 [rows, vocab]
// on the CPU or CUDA; it is not modified. Throws corvid::Error for bad arguments and
// for a row whose logits are all NaN.
void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out);

// Structured output's token masks (engine/structured_output.h): for each i, the logits
// of row rows[i] whose bit is clear in mask row i become -inf (bit t % 32 of word t / 32
// stands for token t; words = ceil(vocab / 32) per row, masks [rows.size(), words] on
// the host). logits F32 [n, vocab] on the CPU or CUDA, modified in place.
void mask_logits(const Tensor& logits, std::span<const int32_t> rows, std::span<const int32_t> masks);

}  // namespace corvid::ops
