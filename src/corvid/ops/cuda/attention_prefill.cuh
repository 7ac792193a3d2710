// Tensor-core prefill attention (attention_prefill.cu), used by attention for
// prompt-sized n when ops::quantized_matmul() is Fast. Internal to ops/cuda.
#pragma once

#include <cstdint>

#include "corvid/core/tensor.h"
#include "corvid/ops/cuda/half_out.cuh"

namespace corvid::ops::cuda {

// The 16-row query tiles a warp takes, 1 or 2 (attention_prefill.cu); 2 unless
// CORVID_FLASH_ROWS=1 (A/B runs); settable for tests.
void set_attention_prefill_rows(int rows);
int attention_prefill_rows();

// Head sizes and extents the kernel handles (else the fp32 kernel runs).
bool attention_prefill_supported(const Tensor& q, const Tensor& k_cache, const Tensor& out);
// Same contract as ops::attention (lse: null, or [n, heads] on the device); positions is the device copy. out16: where the
// output is also written as the next GEMM's 16-bit operand (half_out.cuh), or nowhere.
void attention_prefill(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int32_t* positions,
                       float scale, int64_t window, const Tensor& out, HalfOut out16, float* lse = nullptr);
// The same over a paged pool, for queries that are all in one sequence: its position j
// is pool row table[j / block_size] * block_size + j % block_size (table on the device).
void attention_prefill_sequence(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const int32_t* table,
                                int block_size, const int32_t* positions, float scale, int64_t window,
                                const Tensor& out, HalfOut out16, float* lse = nullptr);

}  // namespace corvid::ops::cuda
