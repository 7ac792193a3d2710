// The CPU MoE kernels. The router is a plain loop per token. The experts: the (token,
// slot) pairs are sorted by expert (a stable counting sort), each expert's rows are
// gathered and go through cpu::matmul (which reduces every output in a fixed order
// whatever the number of rows), and each token sums its slots in slot order, so a
// token's output is the same bits whichever tokens share its experts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/moe.h"

namespace corvid::ops::cpu {

void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids) {
  const int64_t n = logits.rows(), E = logits.cols(), k = weights.cols();
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<bool> taken(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(logits.ptr<float>() + t * E, E, p.data());
    softmax(Tensor(DType::F32, {1, E}, p.data()));
    std::fill(taken.begin(), taken.end(), false);
    float* w = weights.ptr<float>() + t * k;
    int32_t* id = ids.ptr<int32_t>() + t * k;
    float chosen = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)  // strictly greater: ties keep the lower index
        if (!taken[static_cast<size_t>(e)] && (best < 0 || p[static_cast<size_t>(e)] > p[static_cast<size_t>(best)]))
          best = e;
      taken[static_cast<size_t>(best)] = true;
      id[j] = static_cast<int32_t>(best);
      chosen += w[j] = p[static_cast<size_t>(best)];
    }
    if (norm_topk)
      for (int64_t j = 0; j < k; ++j) w[j] /= chosen;
  }
}

void moe_experts(const Tensor& x, const Experts& ex, const Tensor& ids, const Tensor& weights, GatedActivation act,
                 const MoeScratch& s, const Tensor& out) {
  const int64_t n = x.rows(), H = x.cols(), k = ids.cols(), pairs = n * k;
  const int32_t* id = ids.ptr<int32_t>();
  std::vector<int64_t> start(static_cast<size_t>(ex.count) + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) {
    CORVID_CHECK(id[p] >= 0 && id[p] < ex.count, "ops::moe_experts: expert id ", id[p], " outside [0, ", ex.count, ")");
    ++start[static_cast<size_t>(id[p]) + 1];
  }
  for (int64_t e = 0; e < ex.count; ++e) start[static_cast<size_t>(e) + 1] += start[static_cast<size_t>(e)];
  std::vector<int64_t> row_of(static_cast<size_t>(pairs));  // pair → its row in the sorted buffers
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t r = next[static_cast<size_t>(id[p])]++;
      row_of[static_cast<size_t>(p)] = r;
      std::memcpy(s.x.ptr<float>() + r * H, x.ptr<float>() + (p / k) * H, static_cast<size_t>(H) * sizeof(float));
    }
  }
  auto rows = [](const Tensor& t, int64_t r0, int64_t count) {
    return Tensor(DType::F32, {count, t.cols()}, t.ptr<float>() + r0 * t.cols(), t.device);
  };
  for (int64_t e = 0; e < ex.count; ++e) {
    const int64_t r0 = start[static_cast<size_t>(e)], count = start[static_cast<size_t>(e) + 1] - r0;
    if (count == 0) continue;
    const Tensor xe = rows(s.x, r0, count), ge = rows(s.act, r0, count), ue = rows(s.up, r0, count);
    matmul(xe, ex.gate.expert(e), ge, nullptr);
    matmul(xe, ex.up.expert(e), ue, nullptr);
    if (act == GatedActivation::Silu) {
      silu_mul(ge, ue, ge);
    } else {
      gelu_tanh_mul(ge, ue, ge);
    }
    matmul(ge, ex.down.expert(e), rows(s.y, r0, count), nullptr);
  }
  const float* w = weights.ptr<float>();
  for (int64_t t = 0; t < n; ++t) {
    float* o = out.ptr<float>() + t * H;
    std::fill(o, o + H, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float wj = w[t * k + j];
      const float* y = s.y.ptr<float>() + row_of[static_cast<size_t>(t * k + j)] * H;
      for (int64_t c = 0; c < H; ++c) o[c] += wj * y[c];
    }
  }
}

void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out) {
  const int64_t n = x.rows(), H = x.cols();
  for (int64_t r = 0; r < n; ++r) {
    const float g = 1.0f / (1.0f + std::exp(-gate.ptr<float>()[r]));
    const float* a = x.ptr<float>() + r * H;
    const float* b = y.ptr<float>() + r * H;
    float* o = out.ptr<float>() + r * H;
    for (int64_t c = 0; c < H; ++c) o[c] = a[c] + g * b[c];
  }
}

}  // namespace corvid::ops::cpu
