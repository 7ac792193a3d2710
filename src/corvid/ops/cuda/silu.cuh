// silu(g) * u with the CPU's operations (elementwise.cc), for every CUDA kernel that
// computes it (the silu_mul kernels, the gate/up GEMV that ends in it), so all agree bit
// for bit.
#pragma once

namespace corvid::ops::cuda {

__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

}  // namespace corvid::ops::cuda
