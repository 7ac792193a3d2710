#include "corvid/engine/format_masks.h"

#include "corvid/ops/sampling.h"

namespace corvid {

FormatMasks::FormatMasks(int64_t vocab_size, int threads)
    : words_(FormatMatcher::mask_words(vocab_size)), filler_(threads) {}

FormatMasks::~FormatMasks() { cancel(); }

void FormatMasks::start(std::span<FormatMatcher* const> rows) {
  cancel();
  rows_.clear();
  matchers_.clear();
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r]) {
      rows_.push_back(static_cast<int32_t>(r));
      matchers_.push_back(rows[r]);
    }
  if (matchers_.empty()) return;
  masks_.resize(matchers_.size() * static_cast<size_t>(words_));
  pending_ = std::async(std::launch::async, [this] { filler_.fill(matchers_, masks_, words_); });
}

void FormatMasks::apply(const Tensor& logits) {
  if (!pending_.valid()) {
    rows_.clear();
    return;
  }
  pending_.get();
  ops::mask_logits(logits, rows_, masks_);
}

void FormatMasks::cancel() {
  if (!pending_.valid()) return;
  try {
    pending_.get();
  } catch (...) {
  }
}

}  // namespace corvid
