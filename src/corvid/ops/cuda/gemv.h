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

// Fast numerics (ops::QuantizedMatmul::Fast) only, unless CORVID_NO_DP4A=1: for Q8_0,
// Q4_0, Q4_1, Q4_K and Q6_K weights and their GPU row layouts (16-byte aligned rows,
// k % 32 == 0) takes x as int8 blocks of 32 — the ones the op producing x wrote
// (context.h Int8Rows) when it ran just before, else quantized here into
// Context::scratch — and runs integer-dot (dp4a) GEMV kernels; returns true when it
// ran. gemv_tiled calls it first when the kernels are Auto.
bool gemv_dp4a(DType t, const GemvArgs& a, cudaStream_t stream);

// int8 activations for the dp4a GEMVs: x [n, k] (k % 32 == 0) quantized per 32 values
// (scale max|x| / 127 kept in F32, round-half-even, the CPU's Fast rounding) into
// Context::scratch, which the caller must not hand to anyone else until its GEMV ran.
struct Int8Activations {
  const int8_t* q;  // [n, k]
  const float* d;   // [n, k / 32]
};
// Their layout in one buffer: the int8 values, then the F32 scales at a 16-byte boundary.
inline size_t int8_scales_offset(int64_t values) { return (static_cast<size_t>(values) + 15) / 16 * 16; }
inline size_t int8_activation_bytes(int64_t values) {
  return int8_scales_offset(values) + static_cast<size_t>(values) / 32 * sizeof(float);
}
Int8Activations quantize_activations(const float* x, int64_t n, int64_t k, cudaStream_t stream);
// Whether the int8-activation GEMVs may run: not turned off by CORVID_NO_DP4A=1 (read
// once; A/B runs). Callers also check Fast numerics.
bool dp4a_enabled();

// Whether decode GEMVs take int8 activations now (Fast numerics, dp4a on, and the last
// GEMV took them: Context::int8_wanted), so that the op producing a GEMV's input should
// also write it as int8 (context.h Int8Rows) and spare the GEMV its quantizer launch.
// CORVID_NO_FUSED_QUANT=1 says no (A/B runs).
// gemv_int8_reuses(): how many GEMVs took such activations so far (for tests).
bool gemv_int8_inputs();
uint64_t gemv_int8_reuses();

// The direct-load int8 GEMVs of Fast numerics (gemv_direct.cu): Q4_0R, Q4_1R, Q8_0R, Q4_KR
// and Q4_K weights, 16-byte aligned rows, k % 32 == 0, 1..kGemvMaxCols tokens. supports()
// says whether they take a call. CORVID_NO_DIRECT_GEMV=1 makes it say no and uploads keep
// the GGUF layouts (ops::device_weight_dtype): the tiled dp4a kernels run, for A/B runs.
bool gemv_direct_supports(DType t, const GemvArgs& a);
void gemv_direct(DType t, const GemvArgs& a, const Int8Activations& x, cudaStream_t stream);
// The same GEMV over w = [gate; up] (a.m = 2 * half rows, one token, no bias) ending in
// out[i] = act(gate_i) * up_i for i < half (a.out holds half values), act silu (SwiGLU)
// or gelu_tanh (GeGLU): a gated MLP's gate/up projection and activation in one kernel.
// Not for Q4_K (its GGUF layout is only kept for A/B runs).
enum class GemvGlu { None, Silu, GeluTanh };
bool gemv_direct_glu_supports(DType t, const GemvArgs& a);
void gemv_direct_glu(DType t, const GemvArgs& a, const Int8Activations& x, GemvGlu act, cudaStream_t stream);
// gemv_dp4a for that GEMV (x as int8, made by x's producer or quantized here), where
// supports() says yes: Fast numerics with dp4a on, gemv_direct_glu_supports, and not
// CORVID_NO_FUSED_SILU=1 (A/B runs: then the model runs the GEMV and the activation).
bool gemv_dp4a_glu_supports(DType t, const GemvArgs& a);
void gemv_dp4a_glu(DType t, const GemvArgs& a, GemvGlu act, cudaStream_t stream);

// Which GEMV kernels run, for benchmarks and tests comparing them (set between
// launches; not thread-safe). Persistent: tiled kernels on a grid of the blocks the GPU
// holds at once, each streaming several row groups; Tiled: one block per 4-row group;
// General: the one-warp-per-row kernels for every dtype. Auto (the default): the
// faster tiled form per format as measured on the H200 (docs/benchmarks.md):
// persistent for F16/BF16, one block per row group for the block formats.
enum class GemvKernels { Auto, Persistent, Tiled, General };
void set_gemv_kernels(GemvKernels k);

}  // namespace corvid::ops::cuda
