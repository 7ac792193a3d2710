// Elementwise ops the non-Llama families need: GeGLU's gelu_tanh_mul, BERT's gelu, scale
// (embedding and residual multipliers) and logit softcap. Each mirrors
// ops/cpu/elementwise.cc's float arithmetic (tanhf where the CPU calls std::tanh).
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/glu.cuh"
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void gelu_tanh_mul_kernel(const float* g, const float* u, float* o, int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) o[i] = gelu_tanh_times(g[i], u[i]);
}

__global__ void scale_kernel(float* x, float s, int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] *= s;
}

__global__ void gather_columns_kernel(const float* x, int64_t width, int64_t offset, float* out, int64_t cols,
                                      int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = x[i / cols * width + offset + i % cols];
}

__global__ void im2col_1d_kernel(const float* x, int64_t t_in, int64_t channels, int64_t kernel, int64_t stride,
                                 int64_t pad, float* out, int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int64_t cols = channels * kernel, t = i / cols, c = i % cols / kernel, j = i % kernel;
  const int64_t src = t * stride + j - pad;
  out[i] = src >= 0 && src < t_in ? x[src * channels + c] : 0.0f;
}

__global__ void softcap_kernel(float* x, float cap, int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = cap * tanhf(x[i] / cap);
}

__global__ void gelu_kernel(float* x, int64_t count) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

}  // namespace

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t count = gate.numel();
  if (count == 0) return;
  launch_pdl("gelu_tanh_mul_kernel", gelu_tanh_mul_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads),
             context().stream, gate.ptr<float>(), up.ptr<float>(), out.ptr<float>(), count);
}

void scale(const Tensor& x, float s) {
  const int64_t count = x.numel();
  if (count == 0) return;
  launch_pdl("scale_kernel", scale_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), context().stream,
             x.ptr<float>(), s, count);
}

void gather_columns(const Tensor& x, int64_t offset, const Tensor& out) {
  const int64_t count = out.numel();
  if (count == 0) return;
  launch_pdl("gather_columns_kernel", gather_columns_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads),
             context().stream, x.ptr<float>(), x.cols(), offset, out.ptr<float>(), out.cols(), count);
}

void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out) {
  const int64_t count = out.numel();
  if (count == 0) return;
  launch_pdl("im2col_1d_kernel", im2col_1d_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads),
             context().stream, x.ptr<float>(), x.dim(0), x.dim(1), kernel, stride, pad, out.ptr<float>(), count);
}

void softcap(const Tensor& x, float cap) {
  const int64_t count = x.numel();
  if (count == 0) return;
  launch_pdl("softcap_kernel", softcap_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), context().stream,
             x.ptr<float>(), cap, count);
}

void gelu(const Tensor& x) {
  const int64_t count = x.numel();
  launch_pdl("gelu_kernel", gelu_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), context().stream,
             x.ptr<float>(), count);
}

}  // namespace corvid::ops::cuda
