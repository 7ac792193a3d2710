#include "corvid/ops/cpu/sampling.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"

namespace corvid::ops::cpu {

void apply_penalties(std::span<float> logits, const TokenSampling& p) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool output = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !output) return;
  for (size_t j = 0; j < p.penalty_ids.size(); ++j) {
    float& l = logits[static_cast<size_t>(p.penalty_ids[j])];
    // HF/CTRL repetition penalty: each distinct token once, however often it occurs.
    if (repetition) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    const int32_t count = p.output_counts[j];
    if (output && count > 0) l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
  }
}

int32_t pick_token(std::span<float> logits, const TokenSampling& p, DrawOrder order, SamplingScratch& scratch) {
  CORVID_CHECK(!logits.empty(), "sampler: empty logits");
  auto& candidates = scratch.candidates;
  candidates.clear();
  if (p.temperature == 0.0f || p.top_k == 1) {
    // Greedy: the first maximum (lowest id), NaN skipped; equal to top-1 of the sort below
    // (dividing by a positive temperature keeps the order, up to ties it may create).
    const float scale = p.temperature == 0.0f ? 1.0f : p.temperature;
    int32_t best = -1;
    float best_value = 0.0f;
    for (size_t i = 0; i < logits.size(); ++i) {
      const float v = p.temperature == 0.0f ? logits[i] : logits[i] / scale;
      if (std::isnan(v)) continue;
      if (best < 0 || v > best_value) {
        best = static_cast<int32_t>(i);
        best_value = v;
      }
    }
    CORVID_CHECK(best >= 0, "sampler: all logits are NaN");
    return best;
  }

  // Candidates sorted by logit, descending; filters then cut the tail.
  candidates.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) candidates.emplace_back(logits[i] / p.temperature, static_cast<int32_t>(i));
  CORVID_CHECK(!candidates.empty(), "sampler: all logits are NaN");
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(), by_logit);
  } else {
    std::sort(candidates.begin(), candidates.end(), by_logit);
  }
  candidates.resize(keep);
  const double max_logit = candidates.front().first;
  // An infinite maximum (or only -inf) leaves no finite softmax: the first candidate is certain.
  if (!std::isfinite(max_logit)) return candidates.front().second;

  // Softmax over the survivors (in double: the tail sums matter for top-p).
  std::vector<double>& probs = scratch.probs;
  probs.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += probs[i] = std::exp(static_cast<double>(candidates[i].first) - max_logit);
  for (double& prob : probs) prob /= total;

  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (always at least one)
    double mass = 0.0;
    size_t cut = 0;
    while (cut < keep) {
      mass += probs[cut++];
      if (mass >= p.top_p) break;
    }
    keep = cut;
  }
  if (p.min_p > 0.0f) {  // drop tokens below min_p × the top probability
    const double floor = p.min_p * probs[0];
    size_t cut = 1;
    while (cut < keep && probs[cut] >= floor) ++cut;
    keep = cut;
  }
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += probs[i];
  double r = p.uniform * kept_mass;  // uniform_real_distribution(0, kept_mass) computes the same
  if (order == DrawOrder::Descending) {
    for (size_t i = 0; i < keep; ++i) {
      r -= probs[i];
      if (r <= 0.0) return candidates[i].second;
    }
    return candidates[keep - 1].second;
  }
  auto& by_id = scratch.by_id;
  by_id.clear();
  for (size_t i = 0; i < keep; ++i) by_id.emplace_back(candidates[i].second, probs[i]);
  std::sort(by_id.begin(), by_id.end());
  for (const auto& [id, prob] : by_id) {
    r -= prob;
    if (r <= 0.0) return id;
  }
  return by_id.back().first;
}

void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out) {
  const size_t vocab = static_cast<size_t>(logits.cols());
  std::vector<float> row(vocab);
  SamplingScratch scratch;
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* src = logits.row<float>(static_cast<int64_t>(r));
    row.assign(src, src + vocab);
    apply_penalties(row, rows[r]);
    try {
      out[r] = pick_token(row, rows[r], DrawOrder::TokenId, scratch);
    } catch (const Error& e) {
      fail("sample_tokens: row ", r, ": ", e.what());
    }
  }
}

}  // namespace corvid::ops::cpu
