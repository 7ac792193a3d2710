// LayerNorm on the GPU (the encoder families: BERT). One block per row, in three
// passes over the row (mean, variance around it, the output), each thread reading
// and writing the same elements, so out may alias x. The sums run in float in a fixed
// order (block_sum_in_warp_order); the CPU sums in double, so the two agree to the
// float rounding of a row's reduction.
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float eps, float* out,
                                  int64_t cols) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float sums[2][kThreads / 32];  // one per reduction: the second must not wait on readers of the first
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* o = out + static_cast<int64_t>(blockIdx.x) * cols;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) s += xr[i];
  const float mean = block_sum_in_warp_order<kThreads>(s, sums[0]) / static_cast<float>(cols);
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float d = xr[i] - mean;
    ss += d * d;
  }
  const float var = block_sum_in_warp_order<kThreads>(ss, sums[1]) / static_cast<float>(cols);
  const float inv = static_cast<float>(1.0 / sqrt(static_cast<double>(var) + eps));
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
  launch_pdl("layer_norm_kernel", layer_norm_kernel, dim3(static_cast<unsigned>(x.rows())), dim3(kThreads),
             context().stream, x.ptr<float>(), weight.ptr<float>(), bias.ptr<float>(), eps, out.ptr<float>(),
             x.cols());
}

}  // namespace corvid::ops::cuda
