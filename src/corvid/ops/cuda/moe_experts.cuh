// The routed experts' matrix products on the GPU (moe_experts.cu), for moe.cu's
// moe_experts. Internal to ops/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/gemv.h"

namespace corvid::ops::cuda {

// Rows of the grouped GEMM's tiles: each holds the pairs of one expert (moe_plan_size).
constexpr int kExpertTileRows = 64;

// One projection's expert stack (ops::ExpertStack) as the kernels read it: expert e's
// row r starts at base + e * expert_bytes + r * row_bytes.
struct ExpertWeights {
  const uint8_t* base = nullptr;  // row `offset` of expert 0
  size_t expert_bytes = 0;        // stride rows
  size_t row_bytes = 0;
};

// out[p, :] = expert_{e(p)}(a[p / a_div, :]) for (token, slot) pairs p: one projection
// (glu None: w0) or a gate/up pair ending in act(gate) * up (w0 gate, w1 up).
struct ExpertMatmul {
  DType dtype = DType::F32;  // of w0 and w1
  ExpertWeights w0, w1;
  int64_t m = 0, k = 0;  // output values a pair, input width
  GemvGlu glu = GemvGlu::None;
  const float* a = nullptr;  // F32 inputs, rows of lda values (lda % 4 == 0)
  int64_t lda = 0;
  int a_div = 1;             // k (slots) when a holds tokens, 1 when it holds pairs
  float* out = nullptr;      // [pairs, m]
  int experts = 0;
};

// One warp per output row of every pair, e(p) = ids[p], F32 activations and sums
// (k % 8 == 0). exact: the affine block formats (Q4_1R, Q4_K, Q4_KR) decode in F32 as
// the CPU does, not with the f16 arithmetic of the prompt GEMMs.
void expert_gemv(const ExpertMatmul& mm, const int32_t* ids, int64_t pairs, bool exact, cudaStream_t stream);

// The down projection (glu None, a = act by pair) of each of `tokens` tokens' `slots`
// slots and their sum weighted by weights[t * slots + j], in slot order, into mm.out
// [tokens, m]: expert_gemv and moe.cu's combine in one launch, with the same result.
void expert_down_sum(const ExpertMatmul& mm, const int32_t* ids, const float* weights, int64_t tokens, int slots,
                     bool exact, cudaStream_t stream);

// The same two GEMVs with int8 activations (moe_gemv_int8.cu: Fast numerics, dp4a over
// the GPU row layouts Q4_0R/Q4_1R/Q8_0R/Q4_KR, 16-byte aligned rows, k % 32 == 0, at
// most 8 slots): supports() says whether they take mm. x holds the inputs as int8 rows
// of k values (gate/up: one per token, a_div = slots; down: one per pair), quantized as
// gemv.h's quantize_activations does.
bool expert_int8_supports(const ExpertMatmul& mm, int slots);
void expert_gate_up_int8(const ExpertMatmul& mm, const int32_t* ids, int64_t pairs, const Int8Activations& x,
                         cudaStream_t stream);
void expert_down_sum_int8(const ExpertMatmul& mm, const int32_t* ids, const float* weights, int64_t tokens, int slots,
                          const Int8Activations& act, cudaStream_t stream);

// The grouped GEMM on tensor cores (16-bit operands as gemm_tc.cu picks them, F32
// accumulation): tile t of kExpertTileRows rows is expert tile_expert[t] (< 0: none)
// over the pairs rows[t * kExpertTileRows + i] (< 0: padding). k % 32 == 0.
void expert_gemm(const ExpertMatmul& mm, const int32_t* tile_expert, const int32_t* rows, int64_t tiles,
                 cudaStream_t stream);

}  // namespace corvid::ops::cuda
