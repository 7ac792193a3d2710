// The Whisper encoder's dense work on the CPU: every product of a window is a large
// GEMM (1500 rows of activations, or 1500 queries over 1500 keys), where matmul's
// per-element dot kernels (built for decode, and batch invariant across any row count)
// reach a fifth of the FMA rate. Here Eigen's blocked GEMM runs them over F32 copies of
// the weights, split over the thread pool in tiles of a fixed shape per window, so a
// window's result does not depend on the thread count or on the windows beside it.
// Only the encoder side (convolutions, encoder layers, cross-attention K/V) goes here;
// the decoder's steps stay on ops::matmul.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/core/thread_pool.h"

namespace corvid {

class EncoderCpu {
 public:
  // Keeps an F32 copy of `weight` [out, in] (F32, F16 or BF16) and of its bias (may be
  // empty), found again by the weight's address.
  void add(const Tensor& weight, const Tensor& bias);
  bool has(const Tensor& weight) const { return weights_.count(weight.data) > 0; }

  // out = x · weightᵀ + bias, for x [windows * rows_per_window, in] F32 (host).
  void linear(const Tensor& weight, const Tensor& x, const Tensor& out, int64_t rows_per_window, ThreadPool& pool) const;

  // One window's bidirectional attention: q, k, v and out are [T, heads * head_dim] F32
  // views of the window (rows `row` .. row + T of their tensors).
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, int64_t row, int64_t T,
                 int64_t heads, int64_t head_dim, float scale, ThreadPool& pool) const;

  size_t bytes() const;  // of the F32 copies

 private:
  struct Dense {
    std::vector<float> w, bias;  // [out, in]; [out] or empty
    int64_t out = 0, in = 0;
  };
  std::unordered_map<const void*, Dense> weights_;
};

}  // namespace corvid
