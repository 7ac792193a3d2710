// Row-wise and elementwise ops on the GPU: rms_norm, rope, silu_mul, add,
// softmax. Each mirrors ops/cpu/elementwise.cc's arithmetic (RoPE angles as
// float pos * inv_freq, cos/sin in double; SiLU with expf) so the two backends
// agree to float rounding of the reductions.
#include <cmath>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/half_out.cuh"
#include "corvid/ops/cuda/int8_out.cuh"
#include "corvid/ops/cuda/kv_codec.cuh"
#include "corvid/ops/cuda/norm_cluster.h"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/rope.cuh"
#include "corvid/ops/cuda/glu.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;


__device__ __forceinline__ float load_weight(const void* w, DType t, int64_t i) {
  if (t == DType::F32) return static_cast<const float*>(w)[i];
  const uint16_t v = static_cast<const uint16_t*>(w)[i];
  return t == DType::F16 ? half_to_float(v) : bf16_to_float(v);
}

// rms_norm runs a row on one warp when the row is short (the per-head q/k norms: many
// rows of head_dim <= kWarpRowMaxCols), and on a whole block when it is wide (the
// hidden size: a decode step has one row of 4096, which one warp would crawl through
// while the rest of the GPU idles). In both, out may alias x: each thread rewrites only
// the elements it read.
constexpr int64_t kWarpRowMaxCols = 256;

__global__ void rms_norm_warp_rows_kernel(const float* x, const void* w, DType wt, float eps, float* out, int64_t rows,
                                int64_t cols) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  constexpr int kPerLane = kWarpRowMaxCols / 32;
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  // Every load before the first store: out may alias x (and, to the compiler, w), so a
  // load after a store would wait for it, one memory round trip per element.
  float v[kPerLane], wv[kPerLane];
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t i = lane + 32 * e;
    v[e] = i < cols ? xr[i] : 0.0f;
    wv[e] = i < cols ? load_weight(w, wt, i) : 0.0f;
    ss += v[e] * v[e];
  }
  ss = warp_sum(ss);
  const float inv = inverse_rms(ss, cols, eps);
  float* o = out + r * cols;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t i = lane + 32 * e;
    if (i < cols) o[i] = v[e] * inv * wv[e];
  }
}

// x += y and the rms_norm of the sum: one block per row, each thread keeping its
// elements in registers between the two phases. A decode step has a single row, so a
// whole block (not one warp) shares it; and since every thread reads all of its y
// before writing out, out may alias y (the model passes the same buffer).
constexpr int kNormThreads = 256;
constexpr int kNormPerThread = 32;  // rows up to 8192 wide; wider rows take add + rms_norm

__global__ void add_rms_norm_kernel(float* x, const float* y, const void* w, DType wt, float eps, float* out,
                                    int64_t cols, HalfOut out16) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  __shared__ float warp_sums[kNormThreads / 32];
  const int64_t r = blockIdx.x;
  float* xr = x + r * cols;
  const float* yr = y + r * cols;
  // All loads (weights too) before the first store: x, y and out may alias, so the
  // compiler keeps loads after stores in order, one memory round trip each.
  float v[kNormPerThread], wv[kNormPerThread];
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < kNormPerThread; ++e) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(e) * kNormThreads;
    v[e] = i < cols ? xr[i] + yr[i] : 0.0f;
    wv[e] = i < cols ? load_weight(w, wt, i) : 0.0f;
    ss += v[e] * v[e];
  }
#pragma unroll
  for (int e = 0; e < kNormPerThread; ++e) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(e) * kNormThreads;
    if (i < cols) xr[i] = v[e];
  }
  const float inv = inverse_rms(block_sum_in_warp_order<kNormThreads>(ss, warp_sums), cols, eps);
  float* o = out + r * cols;
#pragma unroll
  for (int e = 0; e < kNormPerThread; ++e) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(e) * kNormThreads;
    if (i >= cols) continue;
    const float value = v[e] * inv * wv[e];
    o[i] = value;
    if (out16.p) out16.p[r * cols + i] = half_bits(value, out16.f16);
  }
}

// Rotates pair i of one head in place.
__device__ __forceinline__ void rope_pair(float* v, int i, int half, bool interleaved, float c, float s) {
  const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
  const float2 r = rotate(v[a], v[b], c, s);
  v[a] = r.x;
  v[b] = r.y;
}

// One thread per (token, head, rotated pair).
__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, float attention_factor,
                            int64_t n, int64_t heads, int64_t head_dim, int half, bool interleaved) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * heads * half) return;
  const int i = static_cast<int>(idx % half);
  const int64_t th = idx / half, t = th / heads;
  float c, s;
  rope_cos_sin(positions[t], inv_freq[i], attention_factor, c, s);
  rope_pair(x + th * head_dim, i, half, interleaved, c, s);
}

// rope of q and k and the store of k and v into the cache (elements E: F32, F16 or
// BF16, rounded to nearest even), for token blockIdx.y. A thread takes one item of the
// token: rotated pair i of up to kHeads heads (q heads, then k heads, stored as
// rotated), a k element past rotary_dim (stored as is) or a v element (stored). The
// pair's cos and sin (in double, as on the CPU) are the costly part of a prompt, so
// there a thread computes them once for 8 heads (at 8192 tokens 234 -> 194 us a layer,
// H200); calls of fewer than 16 tokens (a decode step) keep one head a thread, for the
// most threads (Q4_0 decode lost 1.2% with 8).
constexpr int kPromptRopeHeads = 8;
constexpr int kPromptRopeMinTokens = 16;

struct RopeStoreKvArgs {
  float* q;
  float* k;
  const float* v;
  const int32_t* positions;
  const int32_t* rows;
  const float* inv_freq;
  void* k_cache;  // elements of type E (kv_elem.cuh)
  void* v_cache;
  float attention_factor;
  int heads, kv_heads, head_dim, half;
  bool interleaved;
};

template <class E, int kHeads>
__global__ void rope_store_kv_kernel(const RopeStoreKvArgs a) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the projection's output first
  const int t = blockIdx.y;
  int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int64_t kv_row = static_cast<int64_t>(a.kv_heads) * a.head_dim;
  const int32_t row = a.rows[t];
  // No caches (a coded cache, kv_store_coded.cu stores it next): the rotation alone.
  E* k_dst = row >= 0 && a.k_cache != nullptr ? static_cast<E*>(a.k_cache) + row * kv_row : nullptr;
  const int all_heads = a.heads + a.kv_heads;
  const int rope_items = (all_heads + kHeads - 1) / kHeads * a.half;
  if (idx < rope_items) {
    // Consecutive threads take consecutive pairs of the same heads: coalesced.
    const int h0 = idx / a.half * kHeads, i = idx % a.half;
    float c, s;
    rope_cos_sin(a.positions[t], a.inv_freq[i], a.attention_factor, c, s);
    const int ea = a.interleaved ? 2 * i : i, eb = a.interleaved ? 2 * i + 1 : i + a.half;
    float* heads[kHeads];
    float x0[kHeads], x1[kHeads];
#pragma unroll
    for (int e = 0; e < kHeads; ++e) {  // every load before the first store
      const int h = h0 + e;
      heads[e] = h >= all_heads ? nullptr
                 : h < a.heads  ? a.q + (static_cast<int64_t>(t) * a.heads + h) * a.head_dim
                                : a.k + (static_cast<int64_t>(t) * a.kv_heads + (h - a.heads)) * a.head_dim;
      x0[e] = heads[e] ? heads[e][ea] : 0.0f;
      x1[e] = heads[e] ? heads[e][eb] : 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kHeads; ++e) {
      if (!heads[e]) continue;
      const float2 r = rotate(x0[e], x1[e], c, s);
      heads[e][ea] = r.x;
      heads[e][eb] = r.y;
      const int kh = h0 + e - a.heads;
      if (kh >= 0 && k_dst != nullptr) {
        k_dst[kh * a.head_dim + ea] = kv_encode<E>(r.x);
        k_dst[kh * a.head_dim + eb] = kv_encode<E>(r.y);
      }
    }
    return;
  }
  idx -= rope_items;
  const int pass = a.head_dim - 2 * a.half;  // dims past rotary_dim
  if (idx < a.kv_heads * pass) {
    const int h = idx / pass, d = 2 * a.half + idx % pass;
    if (k_dst != nullptr)
      k_dst[h * a.head_dim + d] = kv_encode<E>(a.k[static_cast<int64_t>(t) * kv_row + h * a.head_dim + d]);
    return;
  }
  idx -= a.kv_heads * pass;
  if (idx < kv_row && row >= 0 && a.v_cache != nullptr)
    static_cast<E*>(a.v_cache)[row * kv_row + idx] = kv_encode<E>(a.v[static_cast<int64_t>(t) * kv_row + idx]);
}

__global__ void silu_mul_kernel(const float* g, const float* u, float* o, int64_t count) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) o[i] = silu_times(g[i], u[i]);
}

// silu_mul four values a thread (16-byte aligned, count % 4 == 0), also writing the
// prompt GEMM's 16-bit operand when out16.p is set.
__global__ void silu_mul_vec4_kernel(const float4* g, const float4* u, float4* o, int64_t count4, HalfOut out16) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count4) return;
  const float4 a = g[i], b = u[i];
  const float4 r = make_float4(silu_times(a.x, b.x), silu_times(a.y, b.y), silu_times(a.z, b.z), silu_times(a.w, b.w));
  o[i] = r;
  if (out16.p)
    reinterpret_cast<uint2*>(out16.p)[i] = make_uint2(half_bits2(r.x, r.y, out16.f16), half_bits2(r.z, r.w, out16.f16));
}

// silu_mul of a few decode rows that a GEMV reads next: four values a thread (float4
// loads and stores; count % 32 == 0, so a warp's 128 values are whole activation
// blocks of 8 threads each) written as F32 and as int8 activations.
__global__ void silu_mul_int8_kernel(const float4* g, const float4* u, float4* o, int64_t count4, Int8Out q8) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i - threadIdx.x % 32 >= count4) return;  // whole warps only: the quantizer shuffles
  float4 r = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (i < count4) {
    const float4 a = g[i], b = u[i];
    r = make_float4(silu_times(a.x, b.x), silu_times(a.y, b.y), silu_times(a.z, b.z), silu_times(a.w, b.w));
    o[i] = r;
  }
  store_int8x4<8>(q8, 4 * i, r, i < count4);
}

__global__ void add_kernel(float* a, const float* b, int64_t count) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) a[i] += b[i];
}

// Block-wide reduction through shared memory (kThreads / 32 warps).
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  v = kMax ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? shared[lane] : (kMax ? -INFINITY : 0.0f);
    v = kMax ? warp_max(v) : warp_sum(v);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const float result = shared[0];
  __syncthreads();  // shared is reused by the next reduction
  return result;
}

__global__ void rms_norm_block_rows_kernel(const float* x, const void* w, DType wt, float eps, float* out,
                                          int64_t cols, HalfOut out16) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();  // launched with launch_pdl: the previous kernel's output first
  __shared__ float shared[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) ss += xr[i] * xr[i];
  ss = block_reduce<false>(ss, shared);
  const float inv = inverse_rms(ss, cols, eps);
  float* o = out + r * cols;
  // Loads in groups of 8 ahead of their stores (out may alias x): a load after a store
  // waits for it, so element-by-element this loop was one round trip per element.
  constexpr int kGroup = 8;
  for (int64_t base = threadIdx.x; base < cols; base += kThreads * kGroup) {
    float v[kGroup], wv[kGroup];
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      const int64_t i = base + static_cast<int64_t>(e) * kThreads;
      v[e] = i < cols ? xr[i] : 0.0f;
      wv[e] = i < cols ? load_weight(w, wt, i) : 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      const int64_t i = base + static_cast<int64_t>(e) * kThreads;
      if (i >= cols) continue;
      const float value = v[e] * inv * wv[e];
      o[i] = value;
      if (out16.p) out16.p[r * cols + i] = half_bits(value, out16.f16);
    }
  }
}

// One block per row (rows can be a whole vocabulary).
__global__ void softmax_kernel(float* x, int64_t cols) {
  __shared__ float shared[kThreads / 32];
  float* v = x + static_cast<int64_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) mx = fmaxf(mx, v[i]);
  mx = block_reduce<true>(mx, shared);
  if (mx == -INFINITY) mx = 0.0f;  // an all -inf row gives zeros, as on the CPU
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float e = expf(v[i] - mx);
    v[i] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, shared);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) v[i] *= inv;
}


}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  Context& ctx = context();
  const int64_t rows = x.rows();
  if (rows == 0) return;
  if (x.cols() > kWarpRowMaxCols &&
      (rms_norm_cluster(x, nullptr, weight, eps, out) || rms_norm_rows(x, nullptr, weight, eps, out)))
    return;
  if (x.cols() <= kWarpRowMaxCols) {
    launch_pdl("rms_norm_warp_rows_kernel", rms_norm_warp_rows_kernel, dim3(blocks_for(rows, kThreads / 32)),
               dim3(kThreads), ctx.stream, x.ptr<float>(), weight.data, weight.dtype, eps, out.ptr<float>(), rows,
               x.cols());
    return;
  }
  launch_pdl("rms_norm_block_rows_kernel", rms_norm_block_rows_kernel, dim3(static_cast<unsigned>(rows)),
             dim3(kThreads), ctx.stream, x.ptr<float>(), weight.data, weight.dtype, eps, out.ptr<float>(), x.cols(),
             half_output(out.data, out.rows(), out.cols()));
}

void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& weight, float eps, const Tensor& out) {
  Context& ctx = context();
  const int64_t rows = x.rows();
  if (rows == 0) return;
  if (rms_norm_cluster(x, &y, weight, eps, out) || rms_norm_rows(x, &y, weight, eps, out)) return;
  if (x.cols() > int64_t{kNormThreads} * kNormPerThread) {
    add(x, y);
    rms_norm(x, weight, eps, out);
    return;
  }
  launch_pdl("add_rms_norm_kernel", add_rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads),
             ctx.stream, x.ptr<float>(), y.ptr<float>(), weight.data, weight.dtype, eps, out.ptr<float>(), x.cols(),
             half_output(out.data, out.rows(), out.cols()));
}

void rope(const Tensor& x, const Indices& positions, const RopeParams& params) {
  Context& ctx = context();
  const int64_t n = x.dim(0), heads = x.dim(1), head_dim = x.dim(2);
  const int half = params.rotary_dim / 2;
  if (n == 0) return;
  const int32_t* pos = ctx.indices(UploadSlot::Positions, positions);
  const float* freq = ctx.constant(params.inv_freq);
  launch_pdl("rope_kernel", rope_kernel, dim3(blocks_for(n * heads * half, kThreads)), dim3(kThreads), ctx.stream,
             x.ptr<float>(), pos, freq, params.attention_factor, n, heads, head_dim, half, params.interleaved);
}

void rope_store_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                   const RopeParams& params, const Indices& rows, const Tensor& k_cache,
                   const Tensor& v_cache) {
  Context& ctx = context();
  const int64_t n = q.dim(0);
  if (n == 0) return;
  const int heads = static_cast<int>(q.dim(1)), kv_heads = static_cast<int>(k.dim(1));
  const int head_dim = static_cast<int>(q.dim(2)), half = params.rotary_dim / 2;
  const bool prompt = n >= kPromptRopeMinTokens;
  const int heads_per_thread = prompt ? kPromptRopeHeads : 1;
  const int64_t items = static_cast<int64_t>(heads + kv_heads + heads_per_thread - 1) / heads_per_thread * half +
                        int64_t{kv_heads} * (head_dim - 2 * half) + int64_t{kv_heads} * head_dim;
  CORVID_CHECK(n <= 65535 && items < (int64_t{1} << 30), "CUDA rope_store_kv: ", n, " tokens of ", items,
               " items each is too many for one launch");
  RopeStoreKvArgs args{q.ptr<float>(),
                             k.ptr<float>(),
                             v.ptr<float>(),
                             ctx.indices(UploadSlot::Positions, positions),
                             ctx.indices(UploadSlot::Rows, rows),
                             ctx.constant(params.inv_freq),
                             k_cache.data,
                             v_cache.data,
                             params.attention_factor,
                             heads,
                             kv_heads,
                             head_dim,
                             half,
                             params.interleaved};
  const bool coded = !kv_dtype_is_plain(k_cache.dtype);
  if (coded) args.k_cache = args.v_cache = nullptr;  // rotated here, encoded by store_kv_coded
  const dim3 grid(blocks_for(items, kThreads), static_cast<unsigned>(n));
  dispatch_kv_dtype(coded ? DType::F32 : k_cache.dtype, [&](auto elem) {
    using E = decltype(elem);
    if (prompt) {
      launch_pdl("rope_store_kv_kernel", rope_store_kv_kernel<E, kPromptRopeHeads>, grid, dim3(kThreads), ctx.stream,
                 args);
    } else {
      launch_pdl("rope_store_kv_kernel", rope_store_kv_kernel<E, 1>, grid, dim3(kThreads), ctx.stream, args);
    }
  });
  if (coded)
    store_kv_coded(ctx, k_cache.dtype, v_cache.dtype, k.ptr<float>(), v.ptr<float>(), args.rows, n, kv_heads, head_dim,
                   k_cache.data, v_cache.data);
}

// rope_store_kv_kernel with no rotated pair (half 0) and no q heads: every k and v
// element is an item stored as is.
void store_kv(const Tensor& k, const Tensor& v, const Indices& rows, const Tensor& k_cache, const Tensor& v_cache) {
  Context& ctx = context();
  const int64_t n = k.dim(0);
  if (n == 0) return;
  const int kv_heads = static_cast<int>(k.dim(1)), head_dim = static_cast<int>(k.dim(2));
  if (!kv_dtype_is_plain(k_cache.dtype)) {
    store_kv_coded(ctx, k_cache.dtype, v_cache.dtype, k.ptr<float>(), v.ptr<float>(),
                   ctx.indices(UploadSlot::Rows, rows), n, kv_heads, head_dim, k_cache.data, v_cache.data);
    return;
  }
  const int64_t items = int64_t{2} * kv_heads * head_dim;
  CORVID_CHECK(n <= 65535 && items < (int64_t{1} << 30), "CUDA store_kv: ", n, " tokens of ", items,
               " items each is too many for one launch");
  const RopeStoreKvArgs args{nullptr, k.ptr<float>(), v.ptr<float>(), nullptr, ctx.indices(UploadSlot::Rows, rows),
                             nullptr, k_cache.data, v_cache.data, 1.0f, 0, kv_heads, head_dim, 0, false};
  const dim3 grid(blocks_for(items, kThreads), static_cast<unsigned>(n));
  dispatch_kv_dtype(k_cache.dtype, [&](auto elem) {
    using E = decltype(elem);
    launch_pdl("store_kv_kernel", rope_store_kv_kernel<E, 1>, grid, dim3(kThreads), ctx.stream, args);
  });
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  Context& ctx = context();
  const int64_t count = gate.numel();
  if (count == 0) return;
  // A decode GEMV may read out next: write it as int8 activations too (context.h Int8Rows).
  const bool aligned = aligned16(gate.data) && aligned16(up.data) && aligned16(out.data);
  const bool vectors = count % 32 == 0 && aligned;
  const Context::Int8Rows made = vectors ? ctx.int8_output(out.data, out.rows(), out.cols()) : Context::Int8Rows{};
  if (made.q != nullptr) {
    launch_pdl("silu_mul_int8_kernel", silu_mul_int8_kernel, dim3(blocks_for(count / 4, kThreads)), dim3(kThreads),
               ctx.stream, reinterpret_cast<const float4*>(gate.data), reinterpret_cast<const float4*>(up.data),
               reinterpret_cast<float4*>(out.data), count / 4, Int8Out{made.q, made.d});
    return;
  }
  if (count % 4 == 0 && aligned) {
    launch_pdl("silu_mul_vec4_kernel", silu_mul_vec4_kernel, dim3(blocks_for(count / 4, kThreads)), dim3(kThreads),
               ctx.stream, reinterpret_cast<const float4*>(gate.data), reinterpret_cast<const float4*>(up.data),
               reinterpret_cast<float4*>(out.data), count / 4, half_output(out.data, out.rows(), out.cols()));
    return;
  }
  launch_pdl("silu_mul_kernel", silu_mul_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), ctx.stream,
             gate.ptr<float>(), up.ptr<float>(), out.ptr<float>(), count);
}

void add(const Tensor& x, const Tensor& y) {
  Context& ctx = context();
  const int64_t count = x.numel();
  if (count == 0) return;
  launch_pdl("add_kernel", add_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), ctx.stream, x.ptr<float>(),
             y.ptr<float>(), count);
}

void softmax(const Tensor& x) {
  Context& ctx = context();
  const int64_t rows = x.rows();
  if (rows == 0 || x.cols() == 0) return;
  CORVID_CHECK(rows <= INT32_MAX, "CUDA softmax: too many rows");
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, ctx.stream>>>(x.ptr<float>(), x.cols());
  CORVID_CUDA_LAUNCHED("softmax_kernel");
}

}  // namespace corvid::ops::cuda
