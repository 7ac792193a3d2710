// Tensor-core prefill GEMM (gemm_tc.cu), used by matmul for prefill-sized n when
// ops::quantized_matmul() is Fast. Internal to ops/cuda.
#pragma once

#include <cstdint>

#include "corvid/core/tensor.h"

namespace corvid::ops::cuda {

// Whether gemm_tensor_cores handles this x/w pair (else use the F32 SGEMM path).
bool gemm_tensor_cores_supported(const Tensor& x, const Tensor& w);
// out[n, m] = x[n, k] @ w[m, k]^T with 16-bit operands, fp32 accumulation, + bias[m]
// when the GEMM could add it in its epilogue: returns whether it did (bias null: false),
// else the caller adds it.
bool gemm_tensor_cores(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias);
// How many of those GEMMs took a 16-bit operand made before them (context.h
// GemmOperand) instead of rounding x themselves (for tests).
uint64_t gemm_operand_reuses();

}  // namespace corvid::ops::cuda
