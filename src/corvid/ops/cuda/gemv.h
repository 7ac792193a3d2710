// Decode GEMV on the GPU (host side, no CUDA device code, so plain C++ such as
// bench/gemv_bench.cc can include it): out[c, row] = x[c, :] . w[row, :] (+ bias[row])
// for a few activation rows c < n <= kGemvMaxCols, F32 activations and accumulation.
// matmul.cu holds the general one-warp-per-row kernels; gemv_tiled.cu the
// bandwidth-tuned kernels for the formats decode speed depends on.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "corvid/core/dtype.h"

namespace corvid::ops::cuda {

constexpr int kGemvMaxCols = 8;  // tokens one GEMV pass handles (weights are read once for all)

struct GemvArgs {
  const float* x;     // [n, k], row stride k
  const uint8_t* w;   // [m] rows of row_bytes each, in the stored format
  float* out;         // [n, m]
  const void* bias;   // [m] or null
  DType bias_dtype;
  int64_t m, k;
  size_t row_bytes;
  int n;              // 1..kGemvMaxCols
};

// Runs the tiled GEMV when it handles this dtype and layout (F16, BF16, Q8_0, Q4_0,
// Q4_1, Q4_K, Q6_K; 16-byte aligned rows and x) and returns true; false leaves the
// call to the general kernels.
bool gemv_tiled(DType t, const GemvArgs& a, cudaStream_t stream);

// For benchmarks comparing the tiled and the general kernels: off sends every GEMV to
// the general kernels. On by default; not thread-safe (set it between launches).
void set_gemv_tiled_enabled(bool on);

}  // namespace corvid::ops::cuda
