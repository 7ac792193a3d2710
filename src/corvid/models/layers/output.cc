#include "corvid/models/layers/output.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid::layers {

void OutputHead::forward(const Tensor& x, std::span<const int64_t> rows, Scratch& s, const Tensor& logits,
                         StepOutput output) const {
  const int64_t n_out = static_cast<int64_t>(rows.size()), hidden = x.cols();
  if (n_out == 0) return;
  if (output == StepOutput::Hidden) {
    CORVID_CHECK(logits.rows() == n_out && logits.cols() == hidden, "hidden states must be [", n_out, ", ", hidden,
                 "], got ", logits.shape_str());
    const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
    for (int64_t i = 0; i < n_out; ++i)
      copy_bytes(logits.row(i), x.device, x.row(rows[static_cast<size_t>(i)]), x.device, row_bytes);
    ops::rms_norm(logits, norm, eps, logits);
    return;
  }
  bool consecutive = true;  // rows r0, r0+1, ...: a view of x, no gather (decode steps, a prompt's last row)
  for (int64_t i = 1; i < n_out && consecutive; ++i) consecutive = rows[static_cast<size_t>(i)] == rows[0] + i;
  const Tensor h = rows_of(s.h, n_out, hidden);
  if (consecutive) {
    const Tensor picked(DType::F32, {n_out, hidden}, x.row(rows[0]), x.device);
    ops::rms_norm(picked, norm, eps, h);
    ops::matmul(h, lm_head, logits);
  } else {
    // Gather the wanted rows of x into h, then norm them into the front of x (free by now).
    const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
    for (int64_t i = 0; i < n_out; ++i)
      copy_bytes(h.row(i), x.device, x.row(rows[static_cast<size_t>(i)]), x.device, row_bytes);
    const Tensor front(DType::F32, {n_out, hidden}, x.data, x.device);
    ops::rms_norm(h, norm, eps, front);
    ops::matmul(front, lm_head, logits);
  }
  if (logit_scale != 1.0f) ops::scale(logits, logit_scale);
  if (softcap > 0.0f) ops::softcap(logits, softcap);
}

OutputHead load_output_head(WeightLoader& w, const Tensor& embed_tokens, int64_t vocab, int64_t hidden, float eps,
                            bool tied, bool plus_one) {
  OutputHead head;
  head.norm = w.norm("model.norm.weight", hidden, plus_one);
  head.eps = eps;
  head.lm_head = w.optional("lm_head.weight", {vocab, hidden}, WeightRole::Projection, !tied);
  if (!head.lm_head.data) {
    CORVID_CHECK(tied, w.source(), ": missing tensor lm_head.weight (tie_word_embeddings is false)");
    head.lm_head = embed_tokens;
  }
  return head;
}

int64_t weight_bytes(std::initializer_list<const Tensor*> weights) {
  int64_t total = 0;
  for (const Tensor* t : weights)
    if (t->data) total += static_cast<int64_t>(t->nbytes());
  return total;
}

}  // namespace corvid::layers
