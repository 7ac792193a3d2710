// The gated activations act(g) * u with the CPU's operations (elementwise.cc), for every
// CUDA kernel that computes them (silu_mul, gelu_tanh_mul, the gate/up GEMV that ends in
// one), so all agree bit for bit.
#pragma once

namespace corvid::ops::cuda {

__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// transformers' gelu_pytorch_tanh: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
__device__ __forceinline__ float gelu_tanh_times(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
}

}  // namespace corvid::ops::cuda
