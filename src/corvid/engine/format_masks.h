// FormatMasks: one engine step's token masks for the rows whose request follows a
// format (structured output). start() fills them on a helper thread while the model
// runs the step; apply() waits and clears the forbidden logits, on the host or on
// the GPU (one upload, one launch), before the step's tokens are sampled. A row's
// mask depends only on the tokens accepted before the step, so nothing waits on the
// model for it; the engine thread leaves the matchers alone until apply() returns.
#pragma once

#include <cstdint>
#include <future>
#include <span>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/engine/structured_output.h"

namespace corvid {

class FormatMasks {
 public:
  FormatMasks(int64_t vocab_size, int threads);
  ~FormatMasks();
  FormatMasks(const FormatMasks&) = delete;
  FormatMasks& operator=(const FormatMasks&) = delete;

  // rows[i]: the matcher of logits row i, or null for a free row. Returns at once.
  void start(std::span<FormatMatcher* const> rows);
  // Waits for the masks (rethrowing a failure), then sets every logit they forbid to -inf
  // in `logits` F32 [rows, vocab] (host or device).
  void apply(const Tensor& logits);
  // Waits without applying (the step failed).
  void cancel();
  bool pending() const { return pending_.valid(); }
  // Rows masked by the last apply().
  int64_t masked_rows() const { return static_cast<int64_t>(rows_.size()); }

 private:
  int64_t words_;
  MaskFiller filler_;
  std::vector<int32_t> rows_;
  std::vector<FormatMatcher*> matchers_;
  std::vector<int32_t> masks_;
  std::future<void> pending_;
};

}  // namespace corvid
