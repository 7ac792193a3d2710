#include "corvid/models/whisper/encoder_cpu.h"

// GCC 12 warns inside Eigen's AVX-512 transposes (a known false positive: the
// intrinsics' "undefined" operands), at the point they are inlined into this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// Rows per GEMM tile and queries per attention tile: fixed, so every window is cut the
// same way (its last tile is the same short one in every window).
constexpr int64_t kRowTile = 128;
constexpr int64_t kQueryTile = 128;

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t cols = t.ndim == 1 ? t.dim(0) : t.cols(), rows = t.numel() / cols;
  const size_t row_bytes = t.row_bytes();
  for (int64_t r = 0; r < rows; ++r)
    ops::dequantize_row(t.dtype, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(r) * row_bytes,
                        out.data() + r * cols, cols);
  return out;
}

}  // namespace

void EncoderCpu::add(const Tensor& weight, const Tensor& bias) {
  CORVID_CHECK(weight.device == Device::CPU && weight.ndim == 2, "whisper: encoder weights for the CPU path must be 2-D on the host");
  Dense d;
  d.out = weight.rows();
  d.in = weight.cols();
  d.w = to_f32(weight);
  if (bias.data) d.bias = to_f32(bias);
  weights_[weight.data] = std::move(d);
}

size_t EncoderCpu::bytes() const {
  size_t n = 0;
  for (const auto& [ptr, d] : weights_) n += (d.w.size() + d.bias.size()) * sizeof(float);
  return n;
}

void EncoderCpu::linear(const Tensor& weight, const Tensor& x, const Tensor& out, int64_t rows_per_window,
                        ThreadPool& pool) const {
  const auto it = weights_.find(weight.data);
  CORVID_CHECK(it != weights_.end(), "whisper: no F32 copy of an encoder weight");
  const Dense& d = it->second;
  const int64_t n = x.rows();
  CORVID_CHECK(x.cols() == d.in && out.rows() == n && out.cols() == d.out && rows_per_window > 0 &&
                   n % rows_per_window == 0,
               "whisper: encoder linear shapes");
  const int64_t tiles_per_window = (rows_per_window + kRowTile - 1) / kRowTile;
  const Eigen::Map<const RowMatrix> w(d.w.data(), d.out, d.in);
  pool.parallel_for((n / rows_per_window) * tiles_per_window, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = (t / tiles_per_window) * rows_per_window + (t % tiles_per_window) * kRowTile;
      const int64_t rows = std::min(kRowTile, (t / tiles_per_window + 1) * rows_per_window - row);
      const Eigen::Map<const RowMatrix> xt(x.ptr<float>() + row * d.in, rows, d.in);
      Eigen::Map<RowMatrix> ot(out.ptr<float>() + row * d.out, rows, d.out);
      ot.noalias() = xt * w.transpose();
      if (!d.bias.empty()) ot.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(d.bias.data(), d.out);
    }
  });
}

void EncoderCpu::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, int64_t row,
                           int64_t T, int64_t heads, int64_t head_dim, float scale, ThreadPool& pool) const {
  const int64_t d = heads * head_dim, tiles = (T + kQueryTile - 1) / kQueryTile;
  CORVID_CHECK(q.cols() == d && k.cols() == d && v.cols() == d && out.cols() == d, "whisper: encoder attention shapes");
  const Eigen::OuterStride<> stride(d);
  pool.parallel_for(heads * tiles, [&](int64_t j0, int64_t j1, int) {
    thread_local RowMatrix scores;
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t h = j / tiles, q0 = (j % tiles) * kQueryTile, nq = std::min(kQueryTile, T - q0);
      const ConstStrided qh(q.ptr<float>() + (row + q0) * d + h * head_dim, nq, head_dim, stride);
      const ConstStrided kh(k.ptr<float>() + row * d + h * head_dim, T, head_dim, stride);
      const ConstStrided vh(v.ptr<float>() + row * d + h * head_dim, T, head_dim, stride);
      Strided oh(out.ptr<float>() + (row + q0) * d + h * head_dim, nq, head_dim, stride);
      scores.resize(nq, T);
      scores.noalias() = qh * kh.transpose();
      for (int64_t i = 0; i < nq; ++i) {
        auto s = scores.row(i).array();
        const float mx = s.maxCoeff();
        s = ((s - mx) * scale).exp();
        s /= s.sum();
      }
      oh.noalias() = scores * vh;
    }
  });
}

}  // namespace corvid
