// The prefill GEMM's library call (gemm_tc.cu): cuBLASLt, with the algorithm chosen once
// per shape and a bias added in its epilogue. Internal to ops/cuda.
#pragma once

#include <cstdint>

#include "corvid/ops/cuda/context.h"

namespace corvid::ops::cuda {

// out[n, ldo] columns [0, rows) = x[n, k] @ w[rows, k]^T (+ bias[rows]), 16-bit operands
// (f16 or bf16, both the same), fp32 accumulation and output.
struct LtGemm {
  const void* w = nullptr;
  const void* x = nullptr;
  float* out = nullptr;
  const float* bias = nullptr;  // F32, or null
  int64_t rows = 0, n = 0, k = 0, ldo = 0;
  bool f16 = false;
};

// Runs it on ctx.stream through cublasLtMatmul (host-side setup only, so it may be
// recorded into a graph). False, having done nothing, when cuBLASLt offers no algorithm
// for the shape or CORVID_NO_CUBLASLT=1 (the cublasGemmEx path, for A/B runs).
bool lt_gemm(Context& ctx, const LtGemm& g);
// How many lt_gemm calls added a bias in the epilogue (for tests).
uint64_t lt_gemm_bias_epilogues();

}  // namespace corvid::ops::cuda
