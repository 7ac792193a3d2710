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
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kLowNibbles = 0x0F0F0F0F;
constexpr int kOnes = 0x01010101;     // dp4a with this sums 4 int8

// 16 weight bytes read once: no L1 allocation, so the activations keep the L1.
__device__ __forceinline__ uint4 load_weight16(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ int dot16(uint4 q, int4 x) {
  return __dp4a(static_cast<int>(q.w), x.w,
                __dp4a(static_cast<int>(q.z), x.z, __dp4a(static_cast<int>(q.y), x.y, __dp4a(static_cast<int>(q.x), x.x, 0))));
}
__device__ __forceinline__ uint4 low_nibbles(uint4 q) {
  return make_uint4(q.x & kLowNibbles, q.y & kLowNibbles, q.z & kLowNibbles, q.w & kLowNibbles);
}
__device__ __forceinline__ uint4 high_nibbles(uint4 q) {
  return make_uint4((q.x >> 4) & kLowNibbles, (q.y >> 4) & kLowNibbles, (q.z >> 4) & kLowNibbles,
                    (q.w >> 4) & kLowNibbles);
}
__device__ __forceinline__ int sum16(int4 x) {
  return __dp4a(x.w, kOnes, __dp4a(x.z, kOnes, __dp4a(x.y, kOnes, __dp4a(x.x, kOnes, 0))));
}

// The activations of one unit for one token.
struct XUnit {
  int4 lo, hi;     // 16 int8 each
  float dlo, dhi;  // scales of the activation blocks lo and hi lie in
  int slo, shi;    // sums of the 16 int8 of lo and hi
};

template <DType T>
constexpr bool kIsK = T == DType::Q4_K;
// Formats whose unit needs sum(qx): a zero point (Q4_0) or a minimum (Q4_1, Q4_K, Q4_KR).
template <DType T>
constexpr bool kNeedsSums = T != DType::Q8_0R;

template <DType T>
__device__ __forceinline__ void load_x(const int8_t* __restrict__ qx, const float* __restrict__ dx, int64_t u,
                                       XUnit& x) {
  int64_t blo, bhi, off;
  if constexpr (kIsK<T>) {
    const int64_t sb = u >> 3;
    const int p = static_cast<int>(u & 7);
    blo = 8 * sb + 2 * (p >> 1);
    bhi = blo + 1;
    off = 16 * (p & 1);
  } else {
    blo = bhi = u;
    off = 0;
  }
  const int8_t* lo = qx + 32 * blo + off;
  const int8_t* hi = kIsK<T> ? qx + 32 * bhi + off : lo + 16;
  x.lo = __ldg(reinterpret_cast<const int4*>(lo));
  x.hi = __ldg(reinterpret_cast<const int4*>(hi));
  x.dlo = __ldg(dx + blo);
  x.dhi = kIsK<T> ? __ldg(dx + bhi) : x.dlo;
  if constexpr (kNeedsSums<T>) {
    x.slo = sum16(x.lo);
    x.shi = sum16(x.hi);
  } else {
    x.slo = x.shi = 0;
  }
}

// One row's bytes for one unit.
template <DType T>
struct WUnit {
  uint4 q0, q1;     // quants (q1: Q8_0R's second half; Q4_K/Q4_KR: the super-block header)
  uint32_t scale;   // Q4_0R/Q8_0R: f16 d; Q4_1R: f16 d | f16 m << 16
};

template <DType T>
__device__ __forceinline__ WUnit<T> load_w(const uint8_t* row, int64_t units, int64_t u) {
  WUnit<T> w;
  if constexpr (T == DType::Q4_KR) {
    w.q0 = load_weight16(row + 16 * u);
    // The 8 units of a super-block share this header (8 lanes of a warp: one request).
    w.q1 = load_weight16(q4_kr_header(row, units, u));
  } else if constexpr (T == DType::Q8_0R) {
    w.q0 = load_weight16(row + 32 * u);
    w.q1 = load_weight16(row + 32 * u + 16);
    w.scale = load_u16(row + 32 * units + 2 * u);
  } else if constexpr (T == DType::Q4_0R) {
    w.q0 = load_weight16(row + 16 * u);
    w.scale = load_u16(row + 16 * units + 2 * u);
  } else if constexpr (T == DType::Q4_1R) {
    w.q0 = load_weight16(row + 16 * u);
    w.scale = *reinterpret_cast<const uint32_t*>(row + 16 * units + 4 * u);
  } else {
    static_assert(T == DType::Q4_K, "unsupported format");
    const uint8_t* sb = row + kQ4_KBytes * (u >> 3);
    const int p = static_cast<int>(u & 7);
    w.q1 = load_weight16(sb);  // d, dmin, 12 bytes of 6-bit scales and minimums
    w.q0 = load_weight16(sb + 16 + 32 * (p >> 1) + 16 * (p & 1));
  }
  return w;
}

// This unit's contribution to one row's dot with one token.
template <DType T>
__device__ __forceinline__ float unit_dot(const WUnit<T>& w, const XUnit& x, int64_t u) {
  if constexpr (T == DType::Q8_0R) {
    const int dot = dot16(w.q0, x.lo) + dot16(w.q1, x.hi);
    return half_to_float(static_cast<uint16_t>(w.scale)) * x.dlo * static_cast<float>(dot);
  } else if constexpr (T == DType::Q4_0R) {
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi) - 8 * (x.slo + x.shi);
    return half_to_float(static_cast<uint16_t>(w.scale)) * x.dlo * static_cast<float>(dot);
  } else if constexpr (T == DType::Q4_1R) {
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi);
    const float d = half_to_float(static_cast<uint16_t>(w.scale & 0xFFFF));
    const float m = half_to_float(static_cast<uint16_t>(w.scale >> 16));
    return x.dlo * fmaf(d, static_cast<float>(dot), m * static_cast<float>(x.slo + x.shi));
  } else if constexpr (T == DType::Q4_KR) {
    // Sub-block u % 8 of the super-block: weights d * sc * q - dmin * mn.
    const float d = half_to_float(static_cast<uint16_t>(w.q1.x & 0xFFFF));
    const float dmin = half_to_float(static_cast<uint16_t>(w.q1.x >> 16));
    uint32_t scale, minimum;
    k_scale_min_words(w.q1.y, w.q1.z, w.q1.w, static_cast<int>(u & 7), scale, minimum);
    const int dot = dot16(low_nibbles(w.q0), x.lo) + dot16(high_nibbles(w.q0), x.hi);
    return x.dlo * fmaf(d * small_uint_to_float(scale), static_cast<float>(dot),
                        -dmin * small_uint_to_float(minimum) * static_cast<float>(x.slo + x.shi));
  } else {
    // Sub-blocks j = 2c (low nibbles) and 2c + 1 (high): 6-bit scale and minimum packed
    // in header bytes 4..15 as quant.cuh's k_scale_min reads them.
    const int c = static_cast<int>(u & 7) >> 1;
    const float d = half_to_float(static_cast<uint16_t>(w.q1.x & 0xFFFF));
    const float dmin = half_to_float(static_cast<uint16_t>(w.q1.x >> 16));
    float sc[2], mn[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t scale, minimum;
      k_scale_min_words(w.q1.y, w.q1.z, w.q1.w, 2 * c + h, scale, minimum);
      sc[h] = small_uint_to_float(scale);
      mn[h] = small_uint_to_float(minimum);
    }
    const float lo = fmaf(d * sc[0], static_cast<float>(dot16(low_nibbles(w.q0), x.lo)),
                          -dmin * mn[0] * static_cast<float>(x.slo));
    const float hi = fmaf(d * sc[1], static_cast<float>(dot16(high_nibbles(w.q0), x.hi)),
                          -dmin * mn[1] * static_cast<float>(x.shi));
    return fmaf(x.dlo, lo, x.dhi * hi);
  }
}

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
