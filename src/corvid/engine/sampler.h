// Token sampling from logits: penalties, temperature, top-k, top-p, min-p,
// then a draw from a seeded RNG (the same seed reproduces a run). Temperature
// 0 is greedy (argmax; the lowest id wins a tie, as torch.argmax does).
//
// The filtering itself is the op's (ops/sampling.h, ops/cpu/sampling.h): a Sampler
// holds a request's parameters, its RNG and the sparse penalty list, and either
// samples a host row itself (sample) or hands the op one row's parameters (next)
// for logits that stay on the GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "corvid/ops/cpu/sampling.h"
#include "corvid/ops/sampling.h"

namespace corvid {

struct SamplingParams {
  float temperature = 0.0f;
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // HF/CTRL style, over prompt and output
  float presence_penalty = 0.0f;    // OpenAI style, over output tokens
  float frequency_penalty = 0.0f;   // OpenAI style, over output tokens
  std::optional<uint64_t> seed;     // unset: seeded from std::random_device

  // Throws corvid::Error naming the parameter when a value is out of range.
  void validate() const;
};

// The distinct tokens of a sequence with their occurrence counts in the output: the
// sparse form of the penalties, built in O(sequence length).
class PenaltyList {
 public:
  // Lists the output's tokens, and the prompt's too when with_prompt; ids outside
  // [0, vocab) are ignored.
  void build(std::span<const int32_t> prompt, std::span<const int32_t> output, int64_t vocab, bool with_prompt);
  std::span<const int32_t> ids() const { return ids_; }
  std::span<const int32_t> output_counts() const { return counts_; }

 private:
  std::vector<int32_t> slot_;  // per vocabulary token: its index in ids_ + 1, or 0
  std::vector<int32_t> ids_, counts_;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `logits` is modified (penalties, scaling). `prompt` and
  // `output` are the sequence so far, for the penalties.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  // The op parameters for the next token of this sequence, drawing its random number
  // (only when sampling: greedy leaves the RNG alone, as sample() does). The penalty
  // spans point into this Sampler and stay valid until the next call.
  ops::TokenSampling next(std::span<const int32_t> prompt, std::span<const int32_t> output, int64_t vocab);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  PenaltyList penalties_;
  ops::cpu::SamplingScratch scratch_;
};

// The first maximum (lowest id), NaN skipped; throws when every logit is NaN.
int32_t argmax(std::span<const float> logits);

}  // namespace corvid
