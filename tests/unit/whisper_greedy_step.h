// One greedy decoder step over a set of hypotheses, as the Whisper tests drive the
// model (or a batcher) by hand: each hypothesis is fed its next token, the step's
// logits rows are appended to a trace, and each next token becomes its row's argmax.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "corvid/models/whisper/whisper_model.h"

namespace corvid::fixtures {

inline void greedy_step(WhisperSteps& steps, const std::vector<std::unique_ptr<WhisperSequence>>& hyps,
                        std::vector<int32_t>& next, std::vector<float>& trace) {
  std::vector<WhisperSequence*> seqs;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int64_t> want;
  for (size_t h = 0; h < hyps.size(); ++h) {
    seqs.push_back(hyps[h].get());
    tokens.push_back({next[h]});
    want.push_back(static_cast<int64_t>(h));
  }
  std::vector<float> logits;
  steps.decode(seqs, tokens, want, logits);
  trace.insert(trace.end(), logits.begin(), logits.end());
  const auto V = static_cast<std::ptrdiff_t>(steps.config().vocab_size);
  for (size_t h = 0; h < hyps.size(); ++h) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(h) * V;
    next[h] = static_cast<int32_t>(std::max_element(row, row + V) - row);
  }
}

}  // namespace corvid::fixtures
