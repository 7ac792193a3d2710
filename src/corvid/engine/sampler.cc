#include "corvid/engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"

namespace corvid {

namespace {

ops::TokenSampling op_params(const SamplingParams& p) {
  ops::TokenSampling t;
  t.temperature = p.temperature;
  t.top_k = p.top_k;
  t.top_p = p.top_p;
  t.min_p = p.min_p;
  t.repetition_penalty = p.repetition_penalty;
  t.presence_penalty = p.presence_penalty;
  t.frequency_penalty = p.frequency_penalty;
  return t;
}

}  // namespace

void SamplingParams::validate() const { ops::check_sampling_params(op_params(*this)); }

void PenaltyList::build(std::span<const int32_t> prompt, std::span<const int32_t> output, int64_t vocab,
                        bool with_prompt) {
  if (static_cast<int64_t>(slot_.size()) != vocab) {
    slot_.assign(static_cast<size_t>(vocab), 0);
  } else {
    for (int32_t id : ids_) slot_[static_cast<size_t>(id)] = 0;  // only what the last build set
  }
  ids_.clear();
  counts_.clear();
  auto add = [&](int32_t t, int32_t count) {
    if (t < 0 || t >= vocab) return;
    int32_t& slot = slot_[static_cast<size_t>(t)];
    if (!slot) {
      ids_.push_back(t);
      counts_.push_back(0);
      slot = static_cast<int32_t>(ids_.size());
    }
    counts_[static_cast<size_t>(slot - 1)] += count;
  };
  if (with_prompt)
    for (int32_t t : prompt) add(t, 0);
  for (int32_t t : output) add(t, 1);
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  params_.validate();
  rng_.seed(params.seed ? *params.seed : std::random_device{}());
}

int32_t argmax(std::span<const float> logits) {
  ops::cpu::SamplingScratch scratch;
  return ops::cpu::pick_token(std::span<float>(const_cast<float*>(logits.data()), logits.size()), ops::TokenSampling{},
                              ops::cpu::DrawOrder::Descending, scratch);  // greedy only reads the logits
}

ops::TokenSampling Sampler::next(std::span<const int32_t> prompt, std::span<const int32_t> output, int64_t vocab) {
  ops::TokenSampling t = op_params(params_);
  const bool repetition = params_.repetition_penalty != 1.0f;
  if (repetition || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    penalties_.build(prompt, output, vocab, repetition);
    t.penalty_ids = penalties_.ids();
    t.output_counts = penalties_.output_counts();
  }
  if (params_.temperature > 0.0f) {
    // One draw per sampled token, as the RNG stream has always been consumed; a
    // generate_canonical that rounds up to 1 (old libstdc++) is kept inside [0, 1).
    t.uniform = std::min(std::uniform_real_distribution<double>(0.0, 1.0)(rng_), std::nextafter(1.0, 0.0));
  }
  return t;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  CORVID_CHECK(!logits.empty(), "sampler: empty logits");
  const ops::TokenSampling t = next(prompt, output, static_cast<int64_t>(logits.size()));
  ops::cpu::apply_penalties(logits, t);
  return ops::cpu::pick_token(logits, t, ops::cpu::DrawOrder::Descending, scratch_);
}

}  // namespace corvid
