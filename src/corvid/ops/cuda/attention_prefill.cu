// FlashAttention-2-style prefill attention on tensor cores (QuantizedMatmul::Fast).
//
// A block takes 128 queries of one head; each warp owns 16 or 32 of them (one or two
// 16-row tiles, below) and keeps everything about them in registers: the scores of the
// current key tile, the running softmax max and sum, and the output accumulator (and
// with one row tile its Q fragments, loaded once). Heads of 512 (Gemma 4's full layers)
// would need 256 accumulators a thread for one row tile: there two warps share a row
// tile, each accumulating half of the output dims (both compute the tile's scores), a
// block takes 64 queries and keys come in tiles of 32 (Shape below). The block walks
// the keys its queries can see in tiles of 64 (32), double buffered in shared memory: while
// a tile is used, cp.async brings the next one (a BF16 cache is copied as is; F32 and
// F16 caches are rounded to bf16 through registers, the coded formats (kv_codec.cuh)
// decoded there too).
// Per tile a warp computes S = Q K^T with mma.m16n8k16 (bf16 in, fp32 accumulate),
// folds S into the online softmax, turns the probabilities into the A operand of the
// next MMA without leaving registers, and accumulates O += P V (V read transposed by
// ldmatrix). Memory traffic is Q once, the K/V tiles (shared by the block's warps and,
// through L2, by the heads of a GQA group, which run side by side) and O once.
//
// Masking uses each query's own position, so any positions work (a chunk after a
// cached prefix, sliding windows, shuffled order), not only 0..n-1; tiles wholly
// visible to a warp skip the mask, and tiles no query of a warp sees are skipped.
// Blocks are launched longest first (the last queries see the most keys), so the
// causal triangle does not leave a tail of long blocks.
//
// Numerics: q, k, v and P are rounded to bf16; scores, softmax statistics and the
// output accumulate in fp32. Exact mode keeps the fp32 kernel in attention.cu.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cmath>

#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/ops/cuda/attention_prefill.cuh"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/kv_codec.cuh"
#include "corvid/ops/cuda/kv_rows.cuh"
#include "corvid/ops/cuda/ptx.cuh"

namespace corvid::ops::cuda {

namespace {

// A block takes 128 queries of one head. kRows = 2 (the default): 4 warps of 32
// queries (two 16-row tiles), which use every K and V fragment they load from shared
// memory twice, Q staged in shared memory (FlashAttention-2's shape for head size 128):
// 255 registers, no spills, two blocks an SM. On the H200 at 8192 tokens 283 TFLOP/s
// against 218 with kRows = 1: 8 warps of 16 queries, each keeping its Q fragments in
// registers (there 4 warps gave 222, waiting for K and V separately 178).
// CORVID_FLASH_ROWS=1 selects that one (A/B runs).
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMostQueriesPerBlock = 128;  // a launch's grid: ceil(n / kQueries) blocks a head

// A block's tiles for head size D with kRows 16-row tiles a warp. kSplit warps share a
// row tile, each owning D / kSplit output dims: 2 for heads of 512, whose two stages of
// 64-key K and V tiles would not fit in shared memory either (so 32 keys, 64 queries).
template <int D, int kRows>
struct Shape {
  static constexpr int kSplit = D > 256 ? 2 : 1;
  static constexpr int kQueries = kSplit > 1 ? 64 : kMostQueriesPerBlock;
  static constexpr int kKeys = kSplit > 1 ? 32 : 64;  // keys per tile
  static constexpr int kKeyTiles = kKeys / 8;
  static constexpr int kWarps = kQueries / (16 * kRows) * kSplit;
  static constexpr int kOutDims = D / kSplit;  // output dims a warp accumulates
  // Q in shared memory (else in registers): with two row tiles or shared row tiles.
  static constexpr bool kSharedQ = kRows > 1 || kSplit > 1;
};

// 2^x (MUFU.EX2, flushing subnormal results to 0: they are below any weight that
// matters next to the row's max, which contributes 1).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Shared memory: two stages of a K tile and a V tile, [kKeys][D] bf16 each. The row
// pitch is padded by 16 bytes so the 8 rows an ldmatrix reads fall in distinct banks.
template <int D, int kRows>
struct Layout {
  using S = Shape<D, kRows>;
  static constexpr int kPitch = D + 8;  // bf16 elements
  static constexpr int kTile = S::kKeys * kPitch;
  // K, V x 2 stages, then (kSharedQ) the block's Q, rows of the same pitch.
  static constexpr int kQElems = S::kSharedQ ? S::kQueries * kPitch : 0;
  static constexpr size_t kBytes = (size_t{4} * kTile + kQElems) * sizeof(__nv_bfloat16);
};

// Copies cache rows j0 .. j0 + kKeys - 1 of kv head kvh (wherever `kv` puts them) into
// a bf16 tile; rows at or past `valid` are zero (V must be finite where P is 0).
template <int D, int kKeys, int kThreads, class Kv, class E>
__device__ __forceinline__ void stage_tile(__nv_bfloat16* dst, const E* cache, int64_t stride, int kvh, const Kv& kv,
                                           int j0, int valid) {
  constexpr int kPitch = D + 8;
  if constexpr (__is_same(E, KvBf16)) {
    constexpr int kChunks = D / 8;  // 16-byte chunks per row
    for (int idx = threadIdx.x; idx < kKeys * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      const bool ok = r < valid;
      const E* src = ok ? cache + kv.row(0, j0 + r) * stride + kvh * D + c : cache;
      cp_async16_zfill(smem_address(dst + r * kPitch + c), src, ok ? 16 : 0);
    }
  } else {
    constexpr int kVecs = D / 4;
    for (int idx = threadIdx.x; idx < kKeys * kVecs; idx += kThreads) {
      const int r = idx / kVecs, c = (idx % kVecs) * 4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < valid) v = kv_value4(kv_head(cache, kv.row(0, j0 + r), kvh, static_cast<int>(stride / D), D), c);
      uint2 packed{pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w)};
      *reinterpret_cast<uint2*>(dst + r * kPitch + c) = packed;
    }
  }
}

// Every query of a launch reads the same sequence's keys (Kv: ContiguousKv or SequenceKv).
template <int D, int kRows, class Kv, class EK, class EV>
__global__ void __launch_bounds__(Shape<D, kRows>::kWarps * 32)
    flash_prefill_kernel(const float* __restrict__ q, const EK* __restrict__ k_cache,
                         const EV* __restrict__ v_cache, Kv kv, const int32_t* __restrict__ positions, int n,
                         float scale_log2, int window, float* __restrict__ out, int n_heads, int n_kv_heads,
                         HalfOut out16, float* __restrict__ lse) {
  using L = Layout<D, kRows>;
  using S = Shape<D, kRows>;
  constexpr int kWarps = S::kWarps, kThreads = kWarps * 32, kQueries = S::kQueries, kKeys = S::kKeys;
  constexpr int kKeyTiles = S::kKeyTiles;
  constexpr int kDimSteps = D / 16, kOutTiles = S::kOutDims / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* k_tiles = reinterpret_cast<__nv_bfloat16*>(smem);  // stage s at + s * kTile
  __nv_bfloat16* v_tiles = k_tiles + 2 * L::kTile;
  __nv_bfloat16* q_tile = k_tiles + 4 * L::kTile;  // kSharedQ only
  __shared__ int warp_lo[kWarps], warp_hi[kWarps];

  const int h = blockIdx.x;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kQueries;  // longest blocks first
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The warp's row tiles (shared by kSplit warps) and which part of the output dims it keeps.
  const int row_warp = warp / S::kSplit, out0 = (warp % S::kSplit) * S::kOutDims;
  const int kvh = h / (n_heads / n_kv_heads);
  const int64_t q_stride = static_cast<int64_t>(n_heads) * D, kv_stride = static_cast<int64_t>(n_kv_heads) * D;

  // This thread's query rows: accumulator rows lane/4 and lane/4 + 8 of each of the
  // warp's kRows 16-row tiles (tile r: queries t0 + 16 r + {0, 8}).
  int pos[kRows][2], first[kRows][2];
  bool live[kRows][2];
  const int t0 = q0 + row_warp * 16 * kRows + lane / 4;
  int lo = INT_MAX, hi = -1, all_lo = -1, all_hi = INT_MAX;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int t = t0 + 16 * r + 8 * i;
      live[r][i] = t < n;
      pos[r][i] = live[r][i] ? positions[t] : -1;
      first[r][i] = live[r][i] ? (window > 0 ? max(0, pos[r][i] - window + 1) : 0) : INT_MAX;
      lo = min(lo, first[r][i]);
      hi = max(hi, pos[r][i]);
      all_lo = max(all_lo, first[r][i]);
      all_hi = min(all_hi, pos[r][i]);
    }
  }
  // The keys any query of the warp can see, and the part every query of it sees.
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    all_lo = max(all_lo, __shfl_xor_sync(0xffffffffu, all_lo, o));
    all_hi = min(all_hi, __shfl_xor_sync(0xffffffffu, all_hi, o));
  }
  if (lane == 0) {
    warp_lo[warp] = lo;
    warp_hi[warp] = hi;
  }

  // Q rounded to bf16 once (A operand of S = Q K^T): in registers with one row tile; in
  // shared memory with two (their fragments would not fit beside two accumulators) or
  // heads of 512.
  uint32_t qf[S::kSharedQ ? 1 : kDimSteps][4];
  if constexpr (!S::kSharedQ) {
#pragma unroll
    for (int ks = 0; ks < kDimSteps; ++ks) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float* row = q + static_cast<int64_t>(t0 + 8 * i) * q_stride + static_cast<int64_t>(h) * D;
        const int c = ks * 16 + 2 * (lane % 4);
        float2 a = make_float2(0.f, 0.f), b = make_float2(0.f, 0.f);
        if (live[0][i]) {
          a = *reinterpret_cast<const float2*>(row + c);
          b = *reinterpret_cast<const float2*>(row + c + 8);
        }
        qf[ks][i] = pack_bf16x2(a.x, a.y);
        qf[ks][2 + i] = pack_bf16x2(b.x, b.y);
      }
    }
  } else {
    // The kSplit warps of a row tile stage its 16 kRows rows (zero past n).
    const int row0 = row_warp * 16 * kRows;
    for (int idx = (warp % S::kSplit) * 32 + lane; idx < 16 * kRows * (D / 4); idx += 32 * S::kSplit) {
      const int r = row0 + idx / (D / 4), c = (idx % (D / 4)) * 4, t = q0 + r;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (t < n) {
        v = *reinterpret_cast<const float4*>(q + static_cast<int64_t>(t) * q_stride + static_cast<int64_t>(h) * D + c);
      }
      *reinterpret_cast<uint2*>(q_tile + r * L::kPitch + c) = uint2{pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w)};
    }
  }
  __syncthreads();
  int block_lo = INT_MAX, block_hi = -1;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    block_lo = min(block_lo, warp_lo[w]);
    block_hi = max(block_hi, warp_hi[w]);
  }

  float o[kRows][kOutTiles][4];  // output dims out0 .. out0 + kOutDims - 1
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int dt = 0; dt < kOutTiles; ++dt) o[r][dt][0] = o[r][dt][1] = o[r][dt][2] = o[r][dt][3] = 0.0f;
  float m[kRows][2], l[kRows][2];
#pragma unroll
  for (int r = 0; r < kRows; ++r) m[r][0] = m[r][1] = -INFINITY, l[r][0] = l[r][1] = 0.0f;

  // ldmatrix row addresses, relative to a tile: K rows for S (keys 8 * (lane / 16) +
  // lane % 8, dims 8 * ((lane / 8) % 2)), V rows for O (keys 8 * ((lane / 8) % 2) +
  // lane % 8, dims 8 * (lane / 16)), Q rows for the A operand (rows lane % 8 + 8 *
  // ((lane / 8) % 2) of the row tile, dims 8 * (lane / 16)).
  const uint32_t k_lane = static_cast<uint32_t>(((lane / 16) * 8 + lane % 8) * L::kPitch + ((lane / 8) % 2) * 8) * 2;
  const uint32_t v_lane = static_cast<uint32_t>((((lane / 8) % 2) * 8 + lane % 8) * L::kPitch + (lane / 16) * 8) * 2;
  const uint32_t q_lane = static_cast<uint32_t>((row_warp * 16 * kRows + ((lane / 8) % 2) * 8 + lane % 8) * L::kPitch +
                                                (lane / 16) * 8) * 2;
  const uint32_t k_base = smem_address(k_tiles), v_base = smem_address(v_tiles), q_base = smem_address(q_tile) + q_lane;

  const int tiles = block_hi < block_lo ? 0 : (block_hi - block_lo) / kKeys + 1;
  if (tiles > 0) {
    const int valid = min(kKeys, block_hi - block_lo + 1);
    stage_tile<D, kKeys, kThreads>(k_tiles, k_cache, kv_stride, kvh, kv, block_lo, valid);
    stage_tile<D, kKeys, kThreads>(v_tiles, v_cache, kv_stride, kvh, kv, block_lo, valid);
  }
  cp_async_commit();
  for (int it = 0; it < tiles; ++it) {
    const int j0 = block_lo + it * kKeys, stage = it % 2;
    const int next = j0 + kKeys, valid = min(kKeys, block_hi - next + 1);
    if (it + 1 < tiles) {
      stage_tile<D, kKeys, kThreads>(k_tiles + (1 - stage) * L::kTile, k_cache, kv_stride, kvh, kv, next, valid);
      stage_tile<D, kKeys, kThreads>(v_tiles + (1 - stage) * L::kTile, v_cache, kv_stride, kvh, kv, next, valid);
    }
    cp_async_commit();
    cp_async_wait<1>();  // this tile's copies are done (the next tile's may be in flight)
    __syncthreads();

    if (j0 <= hi && j0 + kKeys - 1 >= lo) {  // some query of this warp sees a key of the tile
      const uint32_t k_tile = k_base + stage * L::kTile * 2 + k_lane;

      // S = Q K^T: per row tile 16 rows x kKeys keys, as accumulator tiles of 16 x 8; each
      // K fragment serves all kRows row tiles.
      float s[kRows][kKeyTiles][4];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) s[r][nt][0] = s[r][nt][1] = s[r][nt][2] = s[r][nt][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kDimSteps; ++ks) {
        uint32_t a[kRows][4];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if constexpr (!S::kSharedQ) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[r][e] = qf[ks][e];
          } else {
            ldmatrix_x4(a[r], q_base + (r * 16 * L::kPitch + ks * 16) * 2);
          }
        }
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          uint32_t b[4];  // keys 16np .. 16np + 15, dims 16ks .. 16ks + 15
          ldmatrix_x4(b, k_tile + (np * 16 * L::kPitch + ks * 16) * 2);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            mma_bf16_16816(s[r][2 * np], a[r], b[0], b[1]);
            mma_bf16_16816(s[r][2 * np + 1], a[r], b[2], b[3]);
          }
        }
      }

      // Mask (only where some query of the warp does not see the whole tile) and take
      // each row's max over the tile (4 lanes share a row). Scores stay unscaled until
      // the exponent, where the scale folds into one FFMA: exp(scale (s - m)) =
      // exp2(s * scale_log2 - m * scale_log2).
      const bool masked = j0 < all_lo || j0 + kKeys - 1 > all_hi;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = e / 2, j = j0 + nt * 8 + 2 * (lane % 4) + e % 2;
            if (masked && (j < first[r][i] || j > pos[r][i])) s[r][nt][e] = -INFINITY;
            tile_max[i] = fmaxf(tile_max[i], s[r][nt][e]);
          }
        }
        float correction[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
          tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
          const float m_new = fmaxf(m[r][i], tile_max[i]);
          // A row that has seen no key yet keeps max -inf; subtract 0 then, so exp2 is 0, not NaN.
          const float m_scaled = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
          correction[i] = fast_exp2(fmaf(m[r][i], scale_log2, -m_scaled));
          m[r][i] = m_new;
          l[r][i] *= correction[i];
#pragma unroll
          for (int nt = 0; nt < kKeyTiles; ++nt) {
            s[r][nt][2 * i] = fast_exp2(fmaf(s[r][nt][2 * i], scale_log2, -m_scaled));
            s[r][nt][2 * i + 1] = fast_exp2(fmaf(s[r][nt][2 * i + 1], scale_log2, -m_scaled));
            l[r][i] += s[r][nt][2 * i] + s[r][nt][2 * i + 1];  // this lane's part; the 4 lanes are summed at the end
          }
        }
#pragma unroll
        for (int dt = 0; dt < kOutTiles; ++dt) {
          o[r][dt][0] *= correction[0];
          o[r][dt][1] *= correction[0];
          o[r][dt][2] *= correction[1];
          o[r][dt][3] *= correction[1];
        }
      }

      const uint32_t v_tile = v_base + stage * L::kTile * 2 + v_lane;
      // O += P V: P's accumulator tiles 2kk and 2kk + 1 are the A operand for keys 16kk ..
      // 16kk + 15; each V fragment serves all kRows row tiles.
#pragma unroll
      for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
        uint32_t a[kRows][4];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          a[r][0] = pack_bf16x2(s[r][2 * kk][0], s[r][2 * kk][1]);
          a[r][1] = pack_bf16x2(s[r][2 * kk][2], s[r][2 * kk][3]);
          a[r][2] = pack_bf16x2(s[r][2 * kk + 1][0], s[r][2 * kk + 1][1]);
          a[r][3] = pack_bf16x2(s[r][2 * kk + 1][2], s[r][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kOutTiles / 2; ++dp) {
          uint32_t b[4];  // keys 16kk .. 16kk + 15, dims out0 + 16dp .. out0 + 16dp + 15
          ldmatrix_x4_trans(b, v_tile + (kk * 16 * L::kPitch + out0 + dp * 16) * 2);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            mma_bf16_16816(o[r][2 * dp], a[r], b[0], b[1]);
            mma_bf16_16816(o[r][2 * dp + 1], a[r], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float sum = l[r][i];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (!live[r][i]) continue;
      const int64_t row = static_cast<int64_t>(t0 + 16 * r + 8 * i) * n_heads + h;
      // (-inf for a query that saw no key: a part of the delayed switch it lies before.)
      if (lse && lane % 4 == 0 && warp % S::kSplit == 0) lse[row] = m[r][i] * (scale_log2 / kLog2e) + logf(sum);
      // The query's own key is always visible (unless lse is asked for), so the sum is > 0.
      const float inv = 1.0f / sum;
      const int64_t at = static_cast<int64_t>(t0 + 16 * r + 8 * i) * q_stride + static_cast<int64_t>(h) * D + out0 +
                         2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kOutTiles; ++dt) {
        const float x = o[r][dt][2 * i] * inv, y = o[r][dt][2 * i + 1] * inv;
        *reinterpret_cast<float2*>(out + at + dt * 8) = make_float2(x, y);
        if (out16.p) *reinterpret_cast<uint32_t*>(out16.p + at + dt * 8) = half_bits2(x, y, out16.f16);
      }
    }
  }
}

// 16-row query tiles a warp takes: 2 unless CORVID_FLASH_ROWS=1 (read once, at load).
int initial_rows() {
  const int rows = env_int("CORVID_FLASH_ROWS", 2);
  if (rows == 1 || rows == 2) return rows;
  std::fprintf(stderr, "corvid: CORVID_FLASH_ROWS=%d: only 1 or 2; using 2\n", rows);
  return 2;
}
int g_rows = initial_rows();

// Whether the GPU gives a block the shared memory of kRows = 2 (e.g. sm_120 cards, which
// run the compute_90 PTX, allow 99 KiB against the 102 KiB of head size 128).
template <int D>
bool two_rows_fit() {
  static const bool fits = [] {
    int most = 0;
    CORVID_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, context().device));
    return static_cast<size_t>(most) >= Layout<D, 2>::kBytes;
  }();
  return fits;
}

template <int D, int kRows, class Kv>
void launch_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                 const int32_t* positions, float scale, int64_t window, const Tensor& out, HalfOut out16,
                 float* lse) {
  Context& ctx = context();
  dispatch_kv_pair(k_cache.dtype, v_cache.dtype, [&](auto key, auto value) {
    using EK = decltype(key);
    using EV = decltype(value);
    if constexpr ((kv_is_turbo<EK> || kv_is_turbo<EV>) && D % 64 != 0) {
      fail("CUDA prefill attention: TurboQuant needs head_dim a multiple of 64, not ", D);  // never instantiated
    } else {
    auto* kernel = flash_prefill_kernel<D, kRows, Kv, EK, EV>;
    static const bool configured = [kernel] {
      CORVID_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Layout<D, kRows>::kBytes)));
      return true;
    }();
    (void)configured;
    const int n = static_cast<int>(q.dim(0)), n_heads = static_cast<int>(q.dim(1));
    // Heads on x, so the heads of a GQA group (and all heads of the longest queries) run together.
    constexpr int kQueries = Shape<D, kRows>::kQueries;
    const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>((n + kQueries - 1) / kQueries));
    kernel<<<grid, Shape<D, kRows>::kWarps * 32, Layout<D, kRows>::kBytes, ctx.stream>>>(
        q.ptr<float>(), static_cast<const EK*>(k_cache.data), static_cast<const EV*>(v_cache.data), kv, positions, n,
        scale * kLog2e, static_cast<int>(std::min<int64_t>(window, INT_MAX)), out.ptr<float>(), n_heads,
        static_cast<int>(k_cache.dim(1)), out16, lse);
    CORVID_CUDA_LAUNCHED("flash_prefill_kernel");
    }
  });
}

template <int D, class Kv>
void launch(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv, const int32_t* positions,
            float scale, int64_t window, const Tensor& out, HalfOut out16, float* lse) {
  // The row max is taken on unscaled scores, which is only the max of the scaled ones for scale > 0.
  try {
    CORVID_CHECK(scale > 0, "CUDA prefill attention: scale must be positive, got ", scale);
    // Head sizes 256 and 512 (Gemma) keep one row tile a warp: two would hold 256 accumulators a thread.
    if constexpr (D <= 128) {
      if (g_rows == 2 && two_rows_fit<D>()) {
        launch_rows<D, 2>(q, k_cache, v_cache, kv, positions, scale, window, out, out16, lse);
        return;
      }
    }
    launch_rows<D, 1>(q, k_cache, v_cache, kv, positions, scale, window, out, out16, lse);
  } catch (...) {
    context().gemm_operand = {};  // the caller recorded an operand this launch never wrote
    throw;
  }
}

}  // namespace

void set_attention_prefill_rows(int rows) {
  CORVID_CHECK(rows == 1 || rows == 2, "attention_prefill: 1 or 2 row tiles a warp, not ", rows);
  g_rows = rows;
}
int attention_prefill_rows() { return g_rows; }

bool attention_prefill_supported(const Tensor& q, const Tensor& k_cache, const Tensor& out) {
  const int64_t head_dim = q.dim(2);
  // Q is staged with float4 loads, the output stored as float2s.
  // (The grid's y is ceil(n / queries a block), 64 for the widest heads.)
  return (head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256 || head_dim == 512) &&
         aligned16(q.data) && reinterpret_cast<uintptr_t>(out.data) % 8 == 0 && q.dim(0) <= INT32_MAX / 2 &&
         k_cache.dim(0) <= INT32_MAX / 2 && (q.dim(0) + 63) / 64 <= 65535;
}

void attention_prefill(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int32_t* positions,
                       float scale, int64_t window, const Tensor& out, HalfOut out16, float* lse) {
  switch (q.dim(2)) {
    case 64: launch<64>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out, out16, lse); return;
    case 96: launch<96>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out, out16, lse); return;
    case 128: launch<128>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out, out16, lse); return;
    case 256: launch<256>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out, out16, lse); return;
    default: launch<512>(q, k_cache, v_cache, ContiguousKv{}, positions, scale, window, out, out16, lse); return;
  }
}

void attention_prefill_sequence(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const int32_t* table,
                                int block_size, const int32_t* positions, float scale, int64_t window,
                                const Tensor& out, HalfOut out16, float* lse) {
  const SequenceKv kv{table, block_size};
  switch (q.dim(2)) {
    case 64: launch<64>(q, k_pool, v_pool, kv, positions, scale, window, out, out16, lse); return;
    case 96: launch<96>(q, k_pool, v_pool, kv, positions, scale, window, out, out16, lse); return;
    case 128: launch<128>(q, k_pool, v_pool, kv, positions, scale, window, out, out16, lse); return;
    case 256: launch<256>(q, k_pool, v_pool, kv, positions, scale, window, out, out16, lse); return;
    default: launch<512>(q, k_pool, v_pool, kv, positions, scale, window, out, out16, lse); return;
  }
}

}  // namespace corvid::ops::cuda
