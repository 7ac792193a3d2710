// Token sampling from logits: penalties, temperature, top-k, top-p, min-p,
// then a draw from a seeded RNG (the same seed reproduces a run). Temperature
// 0 is greedy (argmax; the lowest id wins a tie, as torch.argmax does).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

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

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `logits` is modified (penalties, scaling). `prompt` and
  // `output` are the sequence so far, for the penalties.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused between calls
  std::vector<int32_t> counts_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace corvid
