// FlashAttention-style prefill attention on tensor cores (QuantizedMatmul::Fast).
//
// A block takes 64 queries of one head (16 per warp) and walks the keys they can see
// in tiles of 64: S = Q K^T on bf16 tensor cores (WMMA 16x16x16, fp32 accumulate),
// an online softmax in fp32 (running max and sum per query row), then O += P V on
// tensor cores with P rounded to bf16. Scores never leave shared memory, so memory
// traffic is the K/V tiles (F32, F16 or BF16 in the cache, rounded to bf16 as staged)
// instead of the n x n score matrix. Masking uses each query's own position, so any
// positions work (a chunk after a cached prefix, sliding windows), not only 0..n-1.
//
// Numerics: q, k, v and P are rounded to bf16; scores, softmax statistics and the
// output accumulate in fp32. Exact mode keeps the fp32 kernel in attention.cu.
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/attention_prefill.cuh"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/kv_elem.cuh"
#include "corvid/ops/cuda/kv_rows.cuh"

namespace corvid::ops::cuda {

namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kBlockQ = 16 * kWarps;  // queries per block: 16 rows per warp
constexpr int kBlockK = 64;           // keys per tile

// Shared-memory layout. Pitches pad rows (fewer bank conflicts) and keep every
// 16x16 fragment 32-byte aligned, as WMMA loads require.
template <int D>
struct Layout {
  static constexpr int kLdQK = D + 8;       // bf16 pitch of the Q, K and V tiles
  static constexpr int kLdS = kBlockK + 4;  // fp32 pitch of a warp's scores
  static constexpr int kLdP = kBlockK + 8;  // bf16 pitch of a warp's probabilities
  static constexpr int kLdO = D + 4;        // fp32 pitch of a warp's output accumulator
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + size_t{kBlockQ} * kLdQK * 2;
  static constexpr size_t kV = kK + size_t{kBlockK} * kLdQK * 2;
  static constexpr size_t kS = kV + size_t{kBlockK} * kLdQK * 2;
  static constexpr size_t kP = kS + size_t{kWarps} * 16 * kLdS * 4;
  static constexpr size_t kO = kP + size_t{kWarps} * 16 * kLdP * 2;
  static constexpr size_t kBytes = kO + size_t{kWarps} * 16 * kLdO * 4;
  static_assert(kK % 32 == 0 && kV % 32 == 0 && kS % 32 == 0 && kP % 32 == 0 && kO % 32 == 0);
};

// Copies rows [0, 64) of a [rows, D] tile from F32 global memory into bf16 shared
// memory; rows that are not valid are zero.
template <int D>
__device__ __forceinline__ void stage_rows(bf16* dst, const float* src, int64_t stride, int valid_rows) {
  constexpr int kVecPerRow = D / 4;
  for (int idx = threadIdx.x; idx < kBlockK * kVecPerRow; idx += kWarps * 32) {
    const int r = idx / kVecPerRow, c = (idx % kVecPerRow) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < valid_rows) v = *reinterpret_cast<const float4*>(src + r * stride + c);
    bf16* d = dst + r * Layout<D>::kLdQK + c;
    *reinterpret_cast<__nv_bfloat162*>(d) = __floats2bfloat162_rn(v.x, v.y);
    *reinterpret_cast<__nv_bfloat162*>(d + 2) = __floats2bfloat162_rn(v.z, v.w);
  }
}

// The same for cache rows j0 .. j0 + valid_rows - 1 of kv head kvh, wherever `kv` puts them.
template <int D, class Kv, class E>
__device__ __forceinline__ void stage_kv_rows(bf16* dst, const E* cache, int64_t stride, int kvh, const Kv& kv,
                                              int j0, int valid_rows) {
  constexpr int kVecPerRow = D / 4;
  for (int idx = threadIdx.x; idx < kBlockK * kVecPerRow; idx += kWarps * 32) {
    const int r = idx / kVecPerRow, c = (idx % kVecPerRow) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < valid_rows) v = kv_load4(cache + kv.row(0, j0 + r) * stride + kvh * D + c);
    bf16* d = dst + r * Layout<D>::kLdQK + c;
    *reinterpret_cast<__nv_bfloat162*>(d) = __floats2bfloat162_rn(v.x, v.y);
    *reinterpret_cast<__nv_bfloat162*>(d + 2) = __floats2bfloat162_rn(v.z, v.w);
  }
}

// Every query of a launch reads the same sequence's keys (Kv: ContiguousKv or SequenceKv).
template <int D, class Kv, class E>
__global__ void __launch_bounds__(kWarps * 32)
    flash_prefill_kernel(const float* __restrict__ q, const E* __restrict__ k_cache,
                         const E* __restrict__ v_cache, Kv kv, const int32_t* __restrict__ positions, int n,
                         float scale, int window, float* __restrict__ out, int n_heads, int n_kv_heads) {
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem + L::kQ);
  bf16* ks = reinterpret_cast<bf16*>(smem + L::kK);
  bf16* vs = reinterpret_cast<bf16*>(smem + L::kV);
  __shared__ int lo_shared, hi_shared;

  const int q0 = blockIdx.x * kBlockQ, h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kvh = h / (n_heads / n_kv_heads);
  const int64_t q_stride = static_cast<int64_t>(n_heads) * D, kv_stride = static_cast<int64_t>(n_kv_heads) * D;

  // The key range any query of the block can see.
  if (threadIdx.x == 0) {
    lo_shared = INT_MAX;
    hi_shared = -1;
  }
  __syncthreads();
  if (threadIdx.x < kBlockQ && q0 + threadIdx.x < n) {
    const int p = positions[q0 + threadIdx.x];
    atomicMin(&lo_shared, window > 0 ? max(0, p - window + 1) : 0);
    atomicMax(&hi_shared, p);
  }
  stage_rows<D>(qs, q + q0 * q_stride + static_cast<int64_t>(h) * D, q_stride, n - q0);
  float* o_warp = reinterpret_cast<float*>(smem + L::kO) + warp * 16 * L::kLdO;
  for (int i = lane; i < 16 * D; i += 32) o_warp[(i / D) * L::kLdO + i % D] = 0.0f;
  __syncthreads();
  const int lo = lo_shared, hi = hi_shared;

  // Softmax state: lanes 2r and 2r+1 share query row r of this warp, 32 key columns each.
  const int row = lane / 2, half = lane % 2;
  const int t = q0 + warp * 16 + row;
  const bool live = t < n;
  const int pos = live ? positions[t] : -1;
  const int first = window > 0 ? max(0, pos - window + 1) : 0;
  float m = -INFINITY, l = 0.0f;
  float* s_warp = reinterpret_cast<float*>(smem + L::kS) + warp * 16 * L::kLdS;
  bf16* p_warp = reinterpret_cast<bf16*>(smem + L::kP) + warp * 16 * L::kLdP;
  const bf16* q_warp = qs + warp * 16 * L::kLdQK;

  for (int j0 = lo; j0 <= hi; j0 += kBlockK) {
    __syncthreads();  // every warp is done with the previous tile
    const int valid = min(kBlockK, hi - j0 + 1);
    stage_kv_rows<D>(ks, k_cache, kv_stride, kvh, kv, j0, valid);
    stage_kv_rows<D>(vs, v_cache, kv_stride, kvh, kv, j0, valid);
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
#pragma unroll
    for (int nt = 0; nt < kBlockK / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kt = 0; kt < D / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
        wmma::load_matrix_sync(a, q_warp + kt * 16, L::kLdQK);
        wmma::load_matrix_sync(b, ks + nt * 16 * L::kLdQK + kt * 16, L::kLdQK);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(s_warp + nt * 16, acc, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this tile's 64 keys.
    float s[32];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c, j = j0 + col;
      const bool visible = live && j >= first && j <= pos;
      s[c] = visible ? s_warp[row * L::kLdS + col] * scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float p = s[c] == -INFINITY ? 0.0f : expf(s[c] - m_new);
      sum += p;
      p_warp[row * L::kLdP + half * 32 + c] = __float2bfloat16_rn(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * correction + sum;
    m = m_new;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) o_warp[row * L::kLdO + d] *= correction;
    __syncwarp();

    // O += P V.
#pragma unroll
    for (int dt = 0; dt < D / 16; ++dt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_warp + dt * 16, L::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kt = 0; kt < kBlockK / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
        wmma::load_matrix_sync(a, p_warp + kt * 16, L::kLdP);
        wmma::load_matrix_sync(b, vs + kt * 16 * L::kLdQK + dt * 16, L::kLdQK);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(o_warp + dt * 16, acc, L::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (live) {
    // The query's own key is always visible, so l > 0.
    const float inv = 1.0f / l;
    float* op = out + t * q_stride + static_cast<int64_t>(h) * D;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) op[d] = o_warp[row * L::kLdO + d] * inv;
  }
}

template <int D, class Kv>
void launch(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv, const int32_t* positions,
            float scale, int64_t window, const Tensor& out) {
  Context& ctx = context();
  dispatch_kv_dtype(k_cache.dtype, [&](auto elem) {
    using E = decltype(elem);
    static const bool configured = [] {
      CORVID_CUDA_CHECK(cudaFuncSetAttribute(flash_prefill_kernel<D, Kv, E>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Layout<D>::kBytes)));
      return true;
    }();
    (void)configured;
    const int n = static_cast<int>(q.dim(0)), n_heads = static_cast<int>(q.dim(1));
    const dim3 grid(static_cast<unsigned>((n + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(n_heads));
    flash_prefill_kernel<D, Kv, E><<<grid, kWarps * 32, Layout<D>::kBytes, ctx.stream>>>(
        q.ptr<float>(), static_cast<const E*>(k_cache.data), static_cast<const E*>(v_cache.data), kv, positions, n,
        scale, static_cast<int>(std::min<int64_t>(window, INT_MAX)), out.ptr<float>(), n_heads,
        static_cast<int>(k_cache.dim(1)));
    CORVID_CUDA_LAUNCHED("flash_prefill_kernel");
  });
}

}  // namespace

bool attention_prefill_supported(const Tensor& q, const Tensor& k_cache) {
  const int64_t head_dim = q.dim(2);
  return (head_dim == 64 || head_dim == 128) && q.dim(0) <= INT32_MAX / 2 && k_cache.dim(0) <= INT32_MAX / 2 &&
         q.dim(1) <= 65535;
}

void attention_prefill(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int32_t* positions,
                       float scale, int64_t window, const Tensor& out) {
  if (q.dim(2) == 64) launch<64>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out);
  else launch<128>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out);
}

void attention_prefill_sequence(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const int32_t* table,
                                int block_size, const int32_t* positions, float scale, int64_t window,
                                const Tensor& out) {
  const SequenceKv kv{table, block_size};
  if (q.dim(2) == 64) launch<64>(q, k_pool, v_pool, kv, positions, scale, window, out);
  else launch<128>(q, k_pool, v_pool, kv, positions, scale, window, out);
}

}  // namespace corvid::ops::cuda
