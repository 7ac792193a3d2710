// RMSNorm of a few wide rows (a decode step's hidden state) on a cluster of thread
// blocks (Hopper), optionally after the residual add: x += y, out = x / rms(x) * w; and
// the same for a prompt's many rows, one block a row, both with float4 loads.
//
// Why: one block per row kept the whole row on one SM, and an SM moves ~64 bytes a
// clock to and from L2: a 4096-wide add + norm reads 40 KB and writes 32 KB there,
// twice a layer on the critical path of every decode step (1.8 us each in place,
// docs/benchmarks.md). Here a cluster of 2, 4 or 8 blocks on as many SMs each take a
// slice of the row, sum their squares, and read the other blocks' sums through
// distributed shared memory; every block adds the partial sums in the same order, so
// all compute the same scale. Measured on the H200 with 8 blocks: Q4_0 decode 568 ->
// 573 tok/s, @ 4096 486 -> 492; BF16 even (220): the per-SM traffic was less of the
// norm's time than its latency chain.
//
// The cluster size is the decode GEMVs' choice (Context::norm_cluster_blocks): which
// size wins depends on the GEMV that runs next to the norm, as those GEMV blocks and
// the norm's compete for SMs under programmatic dependent launch. Q4_0 (8-row GEMV
// blocks) decodes 579 -> 599 tok/s with 2 blocks (one block a row: 594), while Q8_0
// (4-row blocks) loses 391 -> 384 with 2 and is even with 4, Q4_1 (8-row blocks too)
// loses 508 -> 502 with 2 and Q4_K 535 -> 528; Q4_K and BF16 even with 4 (2026-12-01,
// docs/benchmarks.md).
#include <cooperative_groups.h>

#include <cmath>
#include <type_traits>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/half_out.cuh"
#include "corvid/ops/cuda/int8_out.cuh"
#include "corvid/ops/cuda/norm_cluster.h"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kMaxClusterBlocks = 8;  // the portable cluster size
constexpr int kClusterThreads = 128;
constexpr int kVecsPerThread = 4;     // float4s a thread keeps
constexpr int64_t kColsPerBlock = int64_t{kClusterThreads} * 4 * kVecsPerThread;
constexpr int64_t kMaxCols = kColsPerBlock * kMaxClusterBlocks;  // rows up to 16384 wide
// Decode steps (a few rows); prompts keep the one-block-per-row kernels.
constexpr int64_t kMaxRows = 64;

// Four weights at i (a multiple of 4; F32 rows 16-byte, 16-bit rows 8-byte aligned).
__device__ __forceinline__ float4 load_weight4(const void* w, DType t, int64_t i) {
  if (t == DType::F32) return *reinterpret_cast<const float4*>(static_cast<const float*>(w) + i);
  const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(w) + i);
  const uint16_t h[4] = {static_cast<uint16_t>(raw.x & 0xFFFF), static_cast<uint16_t>(raw.x >> 16),
                         static_cast<uint16_t>(raw.y & 0xFFFF), static_cast<uint16_t>(raw.y >> 16)};
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = t == DType::F16 ? half_to_float(h[e]) : bf16_to_float(h[e]);
  return make_float4(v[0], v[1], v[2], v[3]);
}

// A thread of either kernel below holds kVecs float4s of a row: values first + e * stride
// .. + 3 for e < kVecs (those at or past cols are zeros and never stored).
template <int kVecs>
__device__ __forceinline__ void load_weights(const void* w, DType wt, int64_t cols, int64_t first, int64_t stride,
                                             float4 (&wv)[kVecs]) {
#pragma unroll
  for (int e = 0; e < kVecs; ++e) {
    const int64_t i = first + e * stride;
    wv[e] = i < cols ? load_weight4(w, wt, i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The thread's values of row `row` of x (x + y, written back to x, when kAdd) and the
// sum of their squares. out may alias x or y in the callers: every load here comes
// before the first store, and each thread rewrites only what it read.
template <bool kAdd, int kVecs>
__device__ __forceinline__ float load_row(float* x, const float* y, int64_t row, int64_t cols, int64_t first,
                                          int64_t stride, float4 (&v)[kVecs]) {
  float4* xr = reinterpret_cast<float4*>(x + row * cols);
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < kVecs; ++e) {
    const int64_t i = first + e * stride;
    v[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < cols) {
      v[e] = xr[i / 4];
      if constexpr (kAdd) {
        const float4 b = reinterpret_cast<const float4*>(y + row * cols)[i / 4];
        v[e] = make_float4(v[e].x + b.x, v[e].y + b.y, v[e].z + b.z, v[e].w + b.w);
      }
    }
    ss += v[e].x * v[e].x + v[e].y * v[e].y + v[e].z * v[e].z + v[e].w * v[e].w;
  }
  if constexpr (kAdd) {
#pragma unroll
    for (int e = 0; e < kVecs; ++e)
      if (first + e * stride < cols) xr[(first + e * stride) / 4] = v[e];
  }
  return ss;
}

// v * inv * w for one float4; stored (when `store`) at value i of row `row` of out, and
// as the prompt GEMM's 16-bit operand when out16.p is set.
__device__ __forceinline__ float4 store_normed(float* out, HalfOut out16, int64_t row, int64_t cols, int64_t i,
                                               float4 v, float4 w, float inv, bool store) {
  const float4 r = make_float4(v.x * inv * w.x, v.y * inv * w.y, v.z * inv * w.z, v.w * inv * w.w);
  if (!store) return r;
  reinterpret_cast<float4*>(out + row * cols)[i / 4] = r;
  if (out16.p)
    *reinterpret_cast<uint2*>(out16.p + row * cols + i) =
        make_uint2(half_bits2(r.x, r.y, out16.f16), half_bits2(r.z, r.w, out16.f16));
  return r;
}

// Row blockIdx.y on a cluster of kBlocks; block rank b takes float4 j of the row where
// j % (kBlocks * kClusterThreads) == b * kClusterThreads + threadIdx.x.
// kAdd: x += y first (x written back). out may alias x or y: every load comes before
// the first store, and each thread rewrites only what it read. q8.q set: out also as
// int8 activations (cols % 32 == 0: a 32-value block is 8 consecutive threads' float4s);
// out16.p set: out also as a prompt GEMM's 16-bit operand.
template <bool kAdd, int kBlocks>
__global__ void __cluster_dims__(kBlocks, 1, 1) __launch_bounds__(kClusterThreads)
    rms_norm_cluster_kernel(float* x, const float* y, const void* w, DType wt, float eps, float* out, int64_t cols,
                            Int8Out q8, HalfOut out16) {
  constexpr int64_t kSliceStride = int64_t{kBlocks} * kClusterThreads * 4;
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t row = blockIdx.y;
  const int64_t first = (static_cast<int64_t>(cluster.block_rank()) * kClusterThreads + threadIdx.x) * 4;
  // The weights depend on no earlier kernel: requested before waiting for x.
  float4 wv[kVecsPerThread];
  load_weights(w, wt, cols, first, kSliceStride, wv);
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  float4 v[kVecsPerThread];
  float ss = load_row<kAdd>(x, y, row, cols, first, kSliceStride, v);
  __shared__ float warp_sums[kClusterThreads / 32];
  __shared__ float block_sum;
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kClusterThreads / 32; ++i) s += warp_sums[i];
    block_sum = s;
  }
  cluster.sync();  // every block's sum is in its shared memory
  float total = 0.0f;
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) total += *cluster.map_shared_rank(&block_sum, b);
  // Arrive now, wait at the end: no block may exit (freeing its block_sum) before all
  // have read it, but the stores need not wait for that.
  cluster.barrier_arrive();
  const float inv = inverse_rms(total, cols, eps);
#pragma unroll
  for (int e = 0; e < kVecsPerThread; ++e) {
    const int64_t i = first + e * kSliceStride;
    const float4 r = store_normed(out, out16, row, cols, i, v[e], wv[e], inv, i < cols);
    // Uniform over the warp (the shuffles need every lane): its first value inside the row.
    // Lanes past the end help with the maximum but store nothing; cols % 32 == 0, so an
    // 8-lane block is all inside or all outside.
    if (q8.q != nullptr && first - threadIdx.x % 32 * 4 + e * kSliceStride < cols)
      store_int8x4<8>(q8, row * cols + i, r, i < cols);
  }
  cluster.barrier_wait();
}

// Prompt rows: one 256-thread block a row, a thread's float4s kRowVecs apart by the
// block's width (rows up to 8192 wide), loads all issued before the reduction. The
// scalar one-block-per-row kernels moved ~2.9 TB/s at 8192 x 4096 (add + norm).
constexpr int kRowThreads = 256;
constexpr int kRowVecs = 8;
constexpr int64_t kRowMaxCols = int64_t{kRowThreads} * 4 * kRowVecs;

// q8.q set (decode rows): out also as int8 activations, as in the cluster kernel (a
// 32-value block is 8 consecutive threads' float4s).
template <bool kAdd>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_rows_kernel(float* x, const float* y, const void* w, DType wt, float eps, float* out, int64_t cols,
                         Int8Out q8, HalfOut out16) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  const int64_t row = blockIdx.x;
  const int64_t first = int64_t{threadIdx.x} * 4, stride = int64_t{kRowThreads} * 4;
  float4 wv[kRowVecs];  // the weights depend on no earlier kernel: requested before waiting
  load_weights(w, wt, cols, first, stride, wv);
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  float4 v[kRowVecs];
  float ss = load_row<kAdd>(x, y, row, cols, first, stride, v);
  __shared__ float warp_sums[kRowThreads / 32];
  const float inv = inverse_rms(block_sum_in_warp_order<kRowThreads>(ss, warp_sums), cols, eps);
#pragma unroll
  for (int e = 0; e < kRowVecs; ++e) {
    const int64_t i = first + e * stride;
    const float4 r = store_normed(out, out16, row, cols, i, v[e], wv[e], inv, i < cols);
    // Uniform over the warp, as in the cluster kernel.
    if (q8.q != nullptr && first - threadIdx.x % 32 * 4 + e * stride < cols)
      store_int8x4<8>(q8, row * cols + i, r, i < cols);
  }
}

// CORVID_NO_CLUSTER_NORM=1 keeps the one-block-per-row kernels (A/B runs).
bool cluster_norm_disabled() {
  static const bool off = env_flag("CORVID_NO_CLUSTER_NORM");
  return off;
}

// CORVID_NORM_CLUSTER=2|4|8 fixes the cluster size (A/B runs); 0: as the GEMVs ask.
int forced_cluster_blocks() {
  static const int blocks = [] {
    const int b = env_int("CORVID_NORM_CLUSTER", 0);
    return b == 2 || b == 4 || b == 8 ? b : 0;
  }();
  return blocks;
}

}  // namespace

bool rms_norm_cluster(const Tensor& x, const Tensor* y, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t rows = x.rows(), cols = x.cols();
  const size_t w_align = weight.dtype == DType::F32 ? 16 : 8;
  if (cluster_norm_disabled() || rows < 1 || rows > kMaxRows || cols % 4 != 0 || cols > kMaxCols ||
      !aligned16(x.data) || !aligned16(out.data) || (y && !aligned16(y->data)) ||
      reinterpret_cast<uintptr_t>(weight.data) % w_align != 0)
    return false;
  Context& ctx = context();
  // The cluster the last decode GEMV asked for (Context::norm_cluster_blocks), grown
  // until the row fits.
  int blocks = forced_cluster_blocks() ? forced_cluster_blocks() : ctx.norm_cluster_blocks;
  while (blocks < kMaxClusterBlocks && cols > blocks * kColsPerBlock) blocks *= 2;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(rows));
  // A decode GEMV may read out next: write it as int8 activations too (context.h Int8Rows).
  const Context::Int8Rows& made = ctx.int8_output(out.data, rows, cols);
  const Int8Out q8{made.q, made.d};
  // Rows of a short prompt: its GEMM may read out next as 16-bit operands.
  const HalfOut out16 = half_output(out.data, rows, cols);
  auto go = [&](auto kb) {
    constexpr int B = decltype(kb)::value;
    if (y) {
      launch_pdl("rms_norm_cluster_kernel", rms_norm_cluster_kernel<true, B>, grid, dim3(kClusterThreads), ctx.stream,
                 x.ptr<float>(), y->ptr<float>(), weight.data, weight.dtype, eps, out.ptr<float>(), cols, q8, out16);
    } else {
      launch_pdl("rms_norm_cluster_kernel", rms_norm_cluster_kernel<false, B>, grid, dim3(kClusterThreads), ctx.stream,
                 x.ptr<float>(), static_cast<const float*>(nullptr), weight.data, weight.dtype, eps, out.ptr<float>(),
                 cols, q8, out16);
    }
  };
  if (blocks == 2) go(std::integral_constant<int, 2>{});
  else if (blocks == 4) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
  return true;
}

bool rms_norm_rows(const Tensor& x, const Tensor* y, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t rows = x.rows(), cols = x.cols();
  const size_t w_align = weight.dtype == DType::F32 ? 16 : 8;
  if (rows < 1 || rows > INT32_MAX || cols % 4 != 0 || cols > kRowMaxCols || !aligned16(x.data) ||
      !aligned16(out.data) || (y && !aligned16(y->data)) || reinterpret_cast<uintptr_t>(weight.data) % w_align != 0)
    return false;
  Context& ctx = context();
  // Decode rows: a decode GEMV may read out next as int8 activations (an empty record for
  // a prompt's rows); a prompt GEMM as 16-bit operands.
  const Context::Int8Rows& made = ctx.int8_output(out.data, rows, cols);
  const Int8Out q8{made.q, made.d};
  const HalfOut out16 = half_output(out.data, rows, cols);
  const dim3 grid(static_cast<unsigned>(rows));
  if (y) {
    launch_pdl("rms_norm_rows_kernel", rms_norm_rows_kernel<true>, grid, dim3(kRowThreads), ctx.stream,
               x.ptr<float>(), y->ptr<float>(), weight.data, weight.dtype, eps, out.ptr<float>(), cols, q8, out16);
  } else {
    launch_pdl("rms_norm_rows_kernel", rms_norm_rows_kernel<false>, grid, dim3(kRowThreads), ctx.stream,
               x.ptr<float>(), static_cast<const float*>(nullptr), weight.data, weight.dtype, eps, out.ptr<float>(),
               cols, q8, out16);
  }
  return true;
}

}  // namespace corvid::ops::cuda
