// Decode GEMV with int8 activations that reads weights straight from global memory
// with 16-byte loads: Q4_0R, Q4_1R, Q8_0R and Q4_KR (the GPU row layouts, row_layout.cu)
// and Q4_K (whose 144-byte super-blocks are already 16-byte aligned pieces; uploads make
// Q4_KR of it, whose units are one sub-block each: Q4_K stays for CORVID_NO_DIRECT_GEMV
// comparisons and tests).
//
// Why: gemv_dp4a.cu stages GGUF blocks (18/20/34 bytes, so only 2-byte aligned)
// through shared memory in 2048-value tiles; at the 8B shapes a row is 2-7 tiles, so
// each block spends most of its life waiting for its first tile, and the GEMVs ran at
// 21-28% of the copy bandwidth (docs/benchmarks.md). Here every thread issues its
// weight loads at once (kRows rows x one 32-value unit, 16 bytes each, plus the
// scales), no shared memory and no barrier until the final reduction; with ~12-16
// blocks of 128 threads per SM that is 60-130 KB in flight per SM, what HBM3e needs.
//
// A unit is 32 weights of a row that share one 16-byte quant load (Q8_0R: two):
//   Q4_0R/Q4_1R: block u (nibble j < 16 of byte j is value j, the high nibble value j+16);
//   Q8_0R: block u, 32 int8 in order;
//   Q4_KR: sub-block u (nibbles as Q4_0R), its scale and minimum in the 16-byte header
//          of super-block u / 8 behind the row's quants;
//   Q4_K: 16 bytes of super-block u / 8 (piece p = u % 8: chunk c = p / 2, half h = p % 2):
//         low nibbles are values 64c + 16h + i, high nibbles 64c + 32 + 16h + i, i < 16,
//         sub-blocks 2c and 2c + 1 with their own 6-bit scale and minimum.
// So a unit meets two 16-value runs of x ("lo", "hi"), each inside one 32-value int8
// activation block with scale dx; with weights a * (q - zero) + b per (sub-)block:
//   sum(w * x) = dx * (a * dot(q, qx) + (b - a * zero) * sum(qx))     per run,
// dot and sum exact in int32 (dp4a), the rest F32, accumulated over units in F32.
//
// Threads of a block stride over units (thread t: units t, t + 128, ...), kRows rows
// each; every row's partial sums meet in one warp-shuffle and shared-memory reduction.
// Activation loads (the int8 vector, L1-resident) are shared by the kRows rows.
#include <algorithm>
#include <cstdint>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv.cuh"
#include "corvid/ops/cuda/gemv_units.cuh"
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// out[c, row] for c < n <= NC. Rows past m and tokens past n read the last valid ones
// (no branches between the loads) and are not written.
// kGlu (NC == 1, w = [gate; up], m = 2 * half): the block's first kRows / 2 rows are gate
// rows row0.., the others the up rows half + row0..; it stores act(gate) * up at
// out[row0 + i] (out holds half values), act silu or (kGlu == GemvGlu::GeluTanh)
// gelu_tanh. Each row's sum is computed exactly as without it.
template <DType T, int NC, int kRows, GemvGlu kGlu = GemvGlu::None>
__global__ void __launch_bounds__(kThreads) gemv_direct_kernel(const GemvArgs args, const int8_t* __restrict__ qx,
                                                              const float* __restrict__ dx) {
  constexpr bool kSiluMul = kGlu != GemvGlu::None;
  static_assert(!kSiluMul || (NC == 1 && kRows % 2 == 0), "a gated activation pairs the rows of one token");
  constexpr int kOutRows = kSiluMul ? kRows / 2 : kRows;  // outputs a block writes
  const int tid = threadIdx.x;
  const int64_t out_rows = kSiluMul ? args.m / 2 : args.m;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kOutRows;
  const int rows = static_cast<int>(std::min<int64_t>(kOutRows, out_rows - row0));
  const int64_t units = args.k / 32;
  const uint8_t* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // kSiluMul: row r % kOutRows of the gate half (r < kOutRows) or of the up half.
    const int64_t row = (r < kOutRows ? 0 : out_rows) + row0 + std::min(r % kOutRows, rows - 1);
    wrow[r] = args.w + static_cast<size_t>(row) * args.row_bytes;
  }

  float acc[kRows][NC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

  // Weights depend on no earlier kernel: the first unit's are requested before waiting
  // for the kernels that produce x (launch_pdl), then each iteration requests the next
  // unit's while it computes this one.
  pdl_launch_dependents();
  WUnit<T> w[kRows];
  if (tid < units) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = load_w<T>(wrow[r], units, tid);
  }
  pdl_wait();
  for (int64_t u = tid; u < units; u += kThreads) {
    WUnit<T> next[kRows];
    if (u + kThreads < units) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) next[r] = load_w<T>(wrow[r], units, u + kThreads);
    }
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      XUnit x;
      const int64_t col = std::min(c, args.n - 1);
      load_x<T>(qx + col * args.k, dx + col * units, u, x);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][c] += unit_dot<T>(w[r], x, u);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = next[r];
  }

  __shared__ float partial[kWarps][kRows * NC];
  if constexpr (kSiluMul) {
    gemv_block_store_glu<kRows, kWarps, kGlu == GemvGlu::GeluTanh>(acc, partial, args.out, row0, rows);
  } else {
    gemv_block_store<kRows, NC, kWarps>(acc, partial, args, row0, rows);
  }
}

// Weight rows per block: Q4_0R and Q4_1R take 8 (16 bytes a row per unit, so 4 rows
// left each thread too little in flight: Q4_0 decode 547 -> 557 tok/s on the H200,
// while Q8_0 lost 374 -> 365 and Q4_K was even; docs/benchmarks.md). Q4_KR keeps 4:
// its unit also holds the 16-byte header, and 8 rows measured 460 against 491 tok/s;
// capping registers for 6 blocks an SM instead of 5, 507 against 520.
constexpr int kMinRowsPerBlock = 4;
template <DType T>
constexpr int kRowsPerBlock = T == DType::Q4_0R || T == DType::Q4_1R ? 2 * kMinRowsPerBlock : kMinRowsPerBlock;
// The cluster of the RMSNorm between two of these GEMVs (Context::norm_cluster_blocks),
// measured per format: Q4_0R decodes 576 -> 597 tok/s with 2 blocks, Q4_1R 508 -> 502 and
// Q4_KR 535 -> 528, so only Q4_0R asks for 2.
template <DType T>
constexpr int kNormClusterBlocks = T == DType::Q4_0R ? 2 : 8;

template <DType T>
void launch(const GemvArgs& a, const Int8Activations& x, cudaStream_t stream) {
  constexpr int R = kRowsPerBlock<T>;
  context().norm_cluster_blocks = kNormClusterBlocks<T>;
  const dim3 grid(static_cast<unsigned>((a.m + R - 1) / R));
  // Tokens round up to a power of two: the extra columns repeat the last token's work.
  auto* kernel = a.n == 1   ? gemv_direct_kernel<T, 1, R>
                 : a.n == 2 ? gemv_direct_kernel<T, 2, R>
                 : a.n <= 4 ? gemv_direct_kernel<T, 4, R>
                            : gemv_direct_kernel<T, kGemvMaxCols, R>;
  launch_pdl("gemv_direct_kernel", kernel, grid, dim3(kThreads), stream, a, x.q, x.d);
}

// The gate/up GEMV that ends in act(gate) * up: kRows / 2 gate rows and their up rows
// a block.
template <DType T>
void launch_glu(const GemvArgs& a, const Int8Activations& x, GemvGlu act, cudaStream_t stream) {
  constexpr int R = kRowsPerBlock<T>;
  context().norm_cluster_blocks = kNormClusterBlocks<T>;
  const dim3 grid(static_cast<unsigned>((a.m / 2 + R / 2 - 1) / (R / 2)));
  auto* kernel = act == GemvGlu::GeluTanh ? gemv_direct_kernel<T, 1, R, GemvGlu::GeluTanh>
                                          : gemv_direct_kernel<T, 1, R, GemvGlu::Silu>;
  launch_pdl("gemv_direct_kernel", kernel, grid, dim3(kThreads), stream, a, x.q, x.d);
}

bool direct_disabled() {
  static const bool off = env_flag("CORVID_NO_DIRECT_GEMV");
  return off;
}

}  // namespace

bool gemv_direct_supports(DType t, const GemvArgs& a) {
  if (direct_disabled()) return false;
  if (t != DType::Q4_0R && t != DType::Q4_1R && t != DType::Q8_0R && t != DType::Q4_KR && t != DType::Q4_K)
    return false;
  return a.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0 && a.k % 32 == 0 && a.n >= 1 &&
         a.n <= kGemvMaxCols && a.m >= 1 && a.m / kMinRowsPerBlock < (int64_t{1} << 31);
}

bool gemv_direct_glu_supports(DType t, const GemvArgs& a) {
  return t != DType::Q4_K && a.n == 1 && a.m % 2 == 0 && a.bias == nullptr && gemv_direct_supports(t, a);
}

void gemv_direct_glu(DType t, const GemvArgs& a, const Int8Activations& x, GemvGlu act, cudaStream_t stream) {
  CORVID_CHECK(act != GemvGlu::None, "CUDA gemv_direct_glu: no activation given");
  switch (t) {
    case DType::Q4_0R: launch_glu<DType::Q4_0R>(a, x, act, stream); return;
    case DType::Q4_1R: launch_glu<DType::Q4_1R>(a, x, act, stream); return;
    case DType::Q8_0R: launch_glu<DType::Q8_0R>(a, x, act, stream); return;
    case DType::Q4_KR: launch_glu<DType::Q4_KR>(a, x, act, stream); return;
    default: fail("CUDA gemv_direct_glu: unsupported weight dtype ", dtype_name(t));
  }
}

void gemv_direct(DType t, const GemvArgs& a, const Int8Activations& x, cudaStream_t stream) {
  switch (t) {
    case DType::Q4_0R: launch<DType::Q4_0R>(a, x, stream); return;
    case DType::Q4_1R: launch<DType::Q4_1R>(a, x, stream); return;
    case DType::Q8_0R: launch<DType::Q8_0R>(a, x, stream); return;
    case DType::Q4_KR: launch<DType::Q4_KR>(a, x, stream); return;
    case DType::Q4_K: launch<DType::Q4_K>(a, x, stream); return;
    default: fail("CUDA gemv_direct: unsupported weight dtype ", dtype_name(t));
  }
}

}  // namespace corvid::ops::cuda
