// ops::sample_tokens front: argument checks with messages naming the row and the
// parameter, then dispatch on the logits' device (as ops.cc does for the other ops).
#include "corvid/ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/ops/cpu/sampling.h"
#ifdef CORVID_HAVE_CUDA
#include "corvid/ops/cuda/cuda_ops.h"
#endif

namespace corvid::ops {

void check_sampling_params(const TokenSampling& p) {
  CORVID_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0f, "temperature must be >= 0, got ", p.temperature);
  CORVID_CHECK(p.top_k >= 0, "top_k must be >= 0, got ", p.top_k);
  CORVID_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p must be in (0, 1], got ", p.top_p);
  CORVID_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1], got ", p.min_p);
  CORVID_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f,
               "repetition_penalty must be > 0, got ", p.repetition_penalty);
  CORVID_CHECK(std::isfinite(p.presence_penalty) && p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f,
               "presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  CORVID_CHECK(std::isfinite(p.frequency_penalty) && p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f,
               "frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
}

void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out) {
  CORVID_CHECK(logits.dtype == DType::F32 && logits.ndim == 2, "ops::sample_tokens: logits must be F32 [rows, vocab], got ",
               dtype_name(logits.dtype), " ", logits.shape_str());
  const int64_t vocab = logits.cols();
  CORVID_CHECK(vocab > 0 && vocab < (int64_t{1} << 31), "ops::sample_tokens: vocabulary of ", vocab, " tokens");
  CORVID_CHECK(logits.rows() == static_cast<int64_t>(rows.size()) && rows.size() == out.size(), "ops::sample_tokens: ",
               logits.rows(), " logits rows, ", rows.size(), " parameter rows and ", out.size(), " outputs differ");
  if (rows.empty()) return;
  CORVID_CHECK(logits.data != nullptr, "ops::sample_tokens: logits has no data");
  std::vector<char> seen;  // distinctness of each row's penalty ids (the GPU applies them in parallel)
  for (size_t r = 0; r < rows.size(); ++r) {
    const TokenSampling& p = rows[r];
    try {
      check_sampling_params(p);
    } catch (const Error& e) {
      fail("ops::sample_tokens: row ", r, ": ", e.what());
    }
    CORVID_CHECK(p.uniform >= 0.0 && p.uniform < 1.0, "ops::sample_tokens: row ", r, ": uniform must be in [0, 1), got ",
                 p.uniform);
    CORVID_CHECK(p.penalty_ids.size() == p.output_counts.size(), "ops::sample_tokens: row ", r, ": ",
                 p.penalty_ids.size(), " penalty ids and ", p.output_counts.size(), " output counts");
    if (p.penalty_ids.empty()) continue;
    if (seen.empty()) seen.assign(static_cast<size_t>(vocab), 0);
    bool ok = true;
    for (size_t j = 0; j < p.penalty_ids.size() && ok; ++j) {
      const int32_t id = p.penalty_ids[j];
      ok = id >= 0 && id < vocab && p.output_counts[j] >= 0 && !seen[static_cast<size_t>(id)];
      if (ok) seen[static_cast<size_t>(id)] = 1;
    }
    for (int32_t id : p.penalty_ids)
      if (id >= 0 && id < vocab) seen[static_cast<size_t>(id)] = 0;
    CORVID_CHECK(ok, "ops::sample_tokens: row ", r, ": penalty ids must be distinct tokens of the vocabulary (",
                 vocab, ") with output counts >= 0");
  }
#ifdef CORVID_HAVE_CUDA
  if (logits.device == Device::CUDA) {
    cuda::count_op();
    cuda::sample_tokens(logits, rows, out);
    return;
  }
#endif
  CORVID_CHECK(logits.device == Device::CPU, "ops::sample_tokens: logits on ", device_name(logits.device),
               " but corvid was not built with CUDA");
  cpu::sample_tokens(logits, rows, out);
}

void mask_logits(const Tensor& logits, std::span<const int32_t> rows, std::span<const int32_t> masks) {
  CORVID_CHECK(logits.dtype == DType::F32 && logits.ndim == 2, "ops::mask_logits: logits must be F32 [rows, vocab], got ",
               dtype_name(logits.dtype), " ", logits.shape_str());
  const int64_t vocab = logits.cols(), words = (vocab + 31) / 32;
  CORVID_CHECK(static_cast<int64_t>(masks.size()) == static_cast<int64_t>(rows.size()) * words, "ops::mask_logits: ",
               masks.size(), " mask words for ", rows.size(), " rows of ", words);
  for (int32_t r : rows)
    CORVID_CHECK(r >= 0 && r < logits.rows(), "ops::mask_logits: row ", r, " outside the ", logits.rows(), " rows");
  if (rows.empty()) return;
#ifdef CORVID_HAVE_CUDA
  if (logits.device == Device::CUDA) {
    cuda::count_op();
    cuda::mask_logits(logits, rows, masks);
    return;
  }
#endif
  CORVID_CHECK(logits.device == Device::CPU, "ops::mask_logits: logits on ", device_name(logits.device),
               " but corvid was not built with CUDA");
  for (size_t i = 0; i < rows.size(); ++i) {
    float* row = logits.row<float>(rows[i]);
    const int32_t* mask = masks.data() + static_cast<int64_t>(i) * words;
    for (int64_t t = 0; t < vocab; ++t)
      if (!((static_cast<uint32_t>(mask[t / 32]) >> (t % 32)) & 1u)) row[t] = -INFINITY;
  }
}

}  // namespace corvid::ops
