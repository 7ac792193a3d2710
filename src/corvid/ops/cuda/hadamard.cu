// ops::hadamard_rotate on the GPU: one block per vector, its values in shared memory,
// the butterflies of the CPU kernel (ops/cpu/elementwise.cc) stage by stage. Each
// stage's sums and differences are the CPU's, in the same order, so the rotated values
// are the CPU's bit for bit.
#include <cmath>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/hadamard_signs.h"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxDim = 1024;

// inverse: D H x / sqrt(d) (the butterflies first, the signs last), undoing H D x / sqrt(d).
__global__ void __launch_bounds__(kThreads) hadamard_kernel(float* __restrict__ x, int d, float norm, bool inverse) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();               // launched with launch_pdl: the previous kernel's output first
  __shared__ float v[kMaxDim];
  float* row = x + static_cast<int64_t>(blockIdx.x) * d;
  for (int i = threadIdx.x; i < d; i += kThreads) v[i] = inverse ? row[i] : row[i] * hadamard_sign(i);
  __syncthreads();
  for (int len = 1; len < d; len *= 2) {
    for (int p = threadIdx.x; p < d / 2; p += kThreads) {
      const int i = p / len * 2 * len + p % len;
      const float a = v[i], b = v[i + len];
      v[i] = a + b;
      v[i + len] = a - b;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < d; i += kThreads) row[i] = inverse ? v[i] * norm * hadamard_sign(i) : v[i] * norm;
}

}  // namespace

void hadamard_rotate(const Tensor& x, bool inverse) {
  Context& ctx = context();
  const int64_t d = x.dim(2), vectors = x.dim(0) * x.dim(1);
  if (vectors == 0) return;
  CORVID_CHECK(d <= kMaxDim && vectors <= INT32_MAX, "CUDA hadamard_rotate: ", x.shape_str(), " (head_dim at most ",
               kMaxDim, ")");
  launch_pdl("hadamard_kernel", hadamard_kernel, dim3(static_cast<unsigned>(vectors)), dim3(kThreads), ctx.stream,
             x.ptr<float>(), static_cast<int>(d), 1.0f / std::sqrt(static_cast<float>(d)), inverse);
}

}  // namespace corvid::ops::cuda
