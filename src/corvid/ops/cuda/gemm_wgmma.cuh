// Prompt GEMM that reads the GPU row layouts of the block formats itself (gemm_wgmma.cu),
// used by gemm_tensor_cores in place of the 16-bit weight tile + cuBLAS. Internal to ops/cuda.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"

namespace corvid::ops::cuda {

struct Context;

// When the fused kernel is taken: Auto (Hopper, a big enough grid: the default), Always
// (wherever it can run: tests, CORVID_FUSED_GEMM=2) or Never (CORVID_FUSED_GEMM=0).
enum class FusedGemm { Auto, Always, Never };
void set_fused_gemm(FusedGemm mode);
FusedGemm fused_gemm();
// Tokens a block of the kernel takes: 128 or 256, or 0 to choose by the grid (the
// default; CORVID_WGMMA_TOKENS sets it for A/B runs).
void set_fused_gemm_tokens(int tokens);
int fused_gemm_tokens();

// Whether gemm_quantized_wgmma takes out[n, m] = x[n, k] @ w[m, k]^T for these shapes.
bool gemm_quantized_wgmma_supported(const Context& ctx, DType t, const void* w, int64_t row_bytes, int64_t n,
                                    int64_t m, int64_t k);
// x: the f16 operand, n rows of k; w: m rows of row_bytes in dtype t; out: F32 [n, m].
// Each weight is decoded to f16 exactly as the weight tile of gemm_tensor_cores does,
// so only the fp32 summation order differs from that path.
void gemm_quantized_wgmma(Context& ctx, DType t, const uint16_t* x, const uint8_t* w, int64_t row_bytes, float* out,
                          int64_t n, int64_t m, int64_t k);
// How many GEMMs took it, and whether this GPU runs it (compute capability 9.0: the
// sm_90a code); for tests.
uint64_t gemm_quantized_wgmma_calls();
bool gemm_quantized_wgmma_runs_here();

}  // namespace corvid::ops::cuda
