#include "corvid/engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"

namespace corvid {

void SamplingParams::validate() const {
  CORVID_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "temperature must be >= 0, got ", temperature);
  CORVID_CHECK(top_k >= 0, "top_k must be >= 0, got ", top_k);
  CORVID_CHECK(top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got ", top_p);
  CORVID_CHECK(min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got ", min_p);
  CORVID_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f, "repetition_penalty must be > 0, got ",
               repetition_penalty);
  CORVID_CHECK(std::isfinite(presence_penalty) && presence_penalty >= -2.0f && presence_penalty <= 2.0f,
               "presence_penalty must be in [-2, 2], got ", presence_penalty);
  CORVID_CHECK(std::isfinite(frequency_penalty) && frequency_penalty >= -2.0f && frequency_penalty <= 2.0f,
               "frequency_penalty must be in [-2, 2], got ", frequency_penalty);
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  params_.validate();
  rng_.seed(params.seed ? *params.seed : std::random_device{}());
}

int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (params_.repetition_penalty != 1.0f) {
    // Each distinct token is penalised once, however often it occurs.
    counts_.assign(logits.size(), 0);
    for (auto seq : {prompt, output})
      for (int32_t t : seq)
        if (t >= 0 && t < vocab && !counts_[static_cast<size_t>(t)]++) {
          float& l = logits[static_cast<size_t>(t)];
          l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
        }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    counts_.assign(logits.size(), 0);
    for (int32_t t : output)
      if (t >= 0 && t < vocab) counts_[static_cast<size_t>(t)]++;
    for (size_t i = 0; i < logits.size(); ++i)
      if (counts_[i]) logits[i] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(counts_[i]);
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  CORVID_CHECK(!logits.empty(), "sampler: empty logits");
  apply_penalties(logits, prompt, output);
  if (params_.temperature == 0.0f) return argmax(logits);

  // Candidates sorted by logit, descending; filters then cut the tail.
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) candidates_.emplace_back(logits[i] / params_.temperature, static_cast<int32_t>(i));
  CORVID_CHECK(!candidates_.empty(), "sampler: all logits are NaN");
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Softmax over the survivors (in double: the tail sums matter for top-p).
  const double max_logit = candidates_.front().first;
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += probs[i] = std::exp(static_cast<double>(candidates_[i].first) - max_logit);
  for (double& p : probs) p /= total;

  if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (always at least one)
    double mass = 0.0;
    size_t cut = 0;
    while (cut < keep) {
      mass += probs[cut++];
      if (mass >= params_.top_p) break;
    }
    keep = cut;
  }
  if (params_.min_p > 0.0f) {  // drop tokens below min_p × the top probability
    const double floor = params_.min_p * probs[0];
    size_t cut = 1;
    while (cut < keep && probs[cut] >= floor) ++cut;
    keep = cut;
  }
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += probs[i];
  std::uniform_real_distribution<double> uniform(0.0, kept_mass);
  double r = uniform(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r <= 0.0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace corvid
