// Helpers shared by the sampling op's tests (CPU and GPU): an independent oracle of
// the kept set (sort everything, then cut, as Sampler's contract says) and uniforms
// that land in the middle of each kept token's CDF interval in token-id order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "corvid/ops/sampling.h"

namespace corvid::testing {

// The kept tokens of a row (logits already penalised) with their probabilities
// normalised over the kept set, in token-id order.
inline std::map<int32_t, double> kept_set(const std::vector<float>& logits, const ops::TokenSampling& p) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i]))
      c.emplace_back(p.temperature > 0 ? logits[i] / p.temperature : logits[i], static_cast<int32_t>(i));
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.temperature == 0 || p.top_k == 1) c.resize(1);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(static_cast<size_t>(p.top_k));
  std::vector<double> prob;
  double total = 0;
  for (const auto& [v, id] : c) total += prob.emplace_back(std::exp(static_cast<double>(v) - c[0].first));
  size_t keep = c.size();
  if (p.top_p < 1.0f) {
    double mass = 0;
    for (keep = 0; keep < c.size();)
      if ((mass += prob[keep++] / total) >= p.top_p) break;
  }
  if (p.min_p > 0.0f)
    for (size_t i = 1; i < keep; ++i)
      if (prob[i] < p.min_p * prob[0]) keep = i;
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += prob[i];
  std::map<int32_t, double> out;
  for (size_t i = 0; i < keep; ++i) out[c[i].second] = prob[i] / kept;
  return out;
}

// For each kept token whose CDF interval (token-id order) is wider than 2 × margin: a
// uniform at its middle, and the token expected there.
inline std::vector<std::pair<double, int32_t>> midpoints(const std::map<int32_t, double>& kept, double margin = 1e-6) {
  std::vector<std::pair<double, int32_t>> out;
  double cdf = 0;
  for (const auto& [id, p] : kept) {
    if (p > 2 * margin) out.emplace_back(std::min(cdf + p / 2, std::nextafter(1.0, 0.0)), id);
    cdf += p;
  }
  return out;
}

// Whether a uniform lies within margin of a CDF boundary of the kept set (token-id order),
// where two correct implementations may round to different sides.
inline bool near_boundary(const std::map<int32_t, double>& kept, double u, double margin = 1e-6) {
  double cdf = 0;
  for (const auto& [id, p] : kept) {
    cdf += p;
    if (std::abs(cdf - u) < margin) return true;
  }
  return false;
}

// Logits spread like a model's: mostly noise, a few standing out, some exact ties.
inline std::vector<float> model_like_logits(size_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  std::vector<float> l(vocab);
  for (float& x : l) x = noise(rng);
  for (int i = 0; i < 8; ++i) l[rng() % vocab] = 6.0f + static_cast<float>(i % 3);  // ties at 6, 7, 8
  return l;
}

}  // namespace corvid::testing
