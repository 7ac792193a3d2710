// The routed experts' matrix products (contracts in moe_experts.cuh).
//
// Steps of a few tokens run expert_gemv: a grid of (row groups, pairs), each warp one
// output row of one pair, reading that pair's expert through its id on the device, so
// a decode step's experts cost two launches whatever they are (gate/up with the
// activation fused, then down) and no host round trip. Longer steps run expert_gemm:
// moe.cu has sorted the pairs into tiles of one expert each, and each block multiplies
// one tile of 64 pairs by 64 output rows of its expert on tensor cores (mma.sync
// m16n8k16), decoding the weights into shared memory as gemm_tc.cu's tile decoder does
// and rounding the F32 inputs to the 16-bit operand as it loads them. Every output is
// one row's dot product reduced in a fixed order, so where a pair lies in its tile, and
// which pairs share it, changes nothing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/decode8.cuh"
#include "corvid/ops/cuda/glu.cuh"
#include "corvid/ops/cuda/half_out.cuh"
#include "corvid/ops/cuda/moe_experts.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/ptx.cuh"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kGemvWarps = 8;

template <GemvGlu kGlu>
__device__ __forceinline__ float glu_out(float g, float u) {
  if constexpr (kGlu == GemvGlu::Silu) return silu_times(g, u);
  if constexpr (kGlu == GemvGlu::GeluTanh) return gelu_tanh_times(g, u);
  return g;
}

constexpr bool affine_format(DType t) { return t == DType::Q4_1R || t == DType::Q4_K || t == DType::Q4_KR; }

// Weights i0 .. i0 + 7 of a row.
template <DType T, bool kExact>
__device__ __forceinline__ void load8(const uint8_t* row, uint32_t i0, uint32_t k, float (&v)[8]) {
  if constexpr (kExact && affine_format(T)) {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = element<T>(row, static_cast<int>(i0 + e), k);
  } else {
    decode8<T>(row, i0, k, v);
  }
}

__device__ __forceinline__ float dot8(const float (&w)[8], const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
  return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

template <DType T, GemvGlu kGlu, bool kExact>
__global__ void __launch_bounds__(kGemvWarps * 32) expert_gemv_kernel(ExpertMatmul a, const int32_t* __restrict__ ids) {
  const int lane = threadIdx.x % 32;
  const int64_t pair = blockIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kGemvWarps + threadIdx.x / 32;
  if (row >= a.m) return;
  pdl_launch_dependents();
  pdl_wait();
  float* out = a.out + pair * a.m + row;
  const int e = ids[pair];
  if (e < 0 || e >= a.experts) {
    if (lane == 0) *out = 0.0f;
    return;
  }
  const auto k = static_cast<uint32_t>(a.k);
  const float* x = a.a + (pair / a.a_div) * a.lda;
  const uint8_t* r0 = a.w0.base + e * a.w0.expert_bytes + row * a.w0.row_bytes;
  const uint8_t* r1 = a.w1.base + e * a.w1.expert_bytes + row * a.w1.row_bytes;
  float s0 = 0.0f, s1 = 0.0f;
#pragma unroll 4
  for (uint32_t i0 = static_cast<uint32_t>(lane) * 8; i0 < k; i0 += 256) {
    float w[8];
    load8<T, kExact>(r0, i0, k, w);
    s0 += dot8(w, x + i0);
    if constexpr (kGlu != GemvGlu::None) {
      load8<T, kExact>(r1, i0, k, w);
      s1 += dot8(w, x + i0);
    }
  }
  s0 = warp_sum(s0);
  if constexpr (kGlu != GemvGlu::None) s1 = warp_sum(s1);
  if (lane == 0) *out = glu_out<kGlu>(s0, s1);
}

// The down projection of every slot of a token and their weighted sum, in slot order:
// out[t, row] = sum_j weights[t, j] * (expert_{ids[t, j]} row . act[t * k + j]), the
// same arithmetic as expert_gemv_kernel followed by moe.cu's combine, in one launch. A
// block is rows_per_block rows x all slots, one (row, slot) dot product per warp at a
// time, so a decode step of top-8 keeps as many warps streaming as the separate GEMV.
constexpr int kMaxSumItems = 64;  // rows_per_block * slots: 8 / k rows of k <= 8 slots, or one row of k <= 64

template <DType T, bool kExact>
__global__ void __launch_bounds__(kGemvWarps * 32)
    expert_down_sum_kernel(ExpertMatmul a, const int32_t* __restrict__ ids, const float* __restrict__ weights,
                           int slots, int rows_per_block, float* __restrict__ out) {
  __shared__ float partial[kMaxSumItems];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = blockIdx.x, row0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int items = rows_per_block * slots;
  pdl_launch_dependents();
  pdl_wait();
  const auto k = static_cast<uint32_t>(a.k);
  for (int i = warp; i < items; i += kGemvWarps) {
    const int64_t row = row0 + i / slots, pair = t * slots + i % slots;
    const int e = ids[pair];
    float y = 0.0f;
    if (row < a.m && e >= 0 && e < a.experts) {
      const float* x = a.a + pair * a.lda;
      const uint8_t* r0 = a.w0.base + e * a.w0.expert_bytes + row * a.w0.row_bytes;
      float s0 = 0.0f;
#pragma unroll 4
      for (uint32_t i0 = static_cast<uint32_t>(lane) * 8; i0 < k; i0 += 256) {
        float w[8];
        load8<T, kExact>(r0, i0, k, w);
        s0 += dot8(w, x + i0);
      }
      y = warp_sum(s0);
    }
    if (lane == 0) partial[i] = y;
  }
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x);
  if (r < rows_per_block && row0 + r < a.m) {
    float acc = 0.0f;
    for (int j = 0; j < slots; ++j) {
      const int64_t pair = t * slots + j;
      const int e = ids[pair];
      if (e >= 0 && e < a.experts) acc += weights[pair] * partial[r * slots + j];
    }
    out[t * a.m + row0 + r] = acc;
  }
}

// The grouped GEMM: block (t, c) is tile t's 64 pairs x output rows 64c.., with four warps of 32 x 32, k in
// steps of 32. Shared rows are padded to 40 halves (80 bytes), so that the fragment
// loads of a warp's eight rows x four words fall in 32 different banks.
constexpr int kTileCols = 64, kTileK = 32, kPitch = kTileK + 8, kGemmThreads = 128;

template <DType T, GemvGlu kGlu>
__global__ void __launch_bounds__(kGemmThreads)
    expert_gemm_kernel(ExpertMatmul a, const int32_t* __restrict__ tile_expert, const int32_t* __restrict__ rows) {
  // f16 operands for f16 and block-format weights, bf16 for bf16 and F32 (gemm_tc.cu).
  constexpr bool kF16 = T != DType::BF16 && T != DType::F32;
  constexpr int kMats = kGlu == GemvGlu::None ? 1 : 2;
  __shared__ __align__(16) uint16_t as[kExpertTileRows][kPitch];
  __shared__ __align__(16) uint16_t bs[kMats][kTileCols][kPitch];
  __shared__ int32_t pair_of[kExpertTileRows];
  pdl_launch_dependents();
  pdl_wait();
  const int e = tile_expert[blockIdx.x];
  if (e < 0) return;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kExpertTileRows) pair_of[tid] = rows[static_cast<int64_t>(blockIdx.x) * kExpertTileRows + tid];
  __syncthreads();
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileCols;
  const auto k = static_cast<uint32_t>(a.k);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;

  // This thread's share of the loads: half a row of the input tile (16 values) and
  // two groups of eight weights of each matrix.
  const int arow = tid / 2, acol = (tid % 2) * 16;
  const int32_t apair = pair_of[arow];
  const float* asrc = apair >= 0 ? a.a + static_cast<int64_t>(apair / a.a_div) * a.lda + acol : nullptr;
  const uint8_t* wrow[kMats][2];
  int brow[2], bcol[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int group = tid + i * kGemmThreads;
    brow[i] = group / 4, bcol[i] = (group % 4) * 8;
    const int64_t col = n0 + brow[i];
#pragma unroll
    for (int mat = 0; mat < kMats; ++mat) {
      const ExpertWeights& w = mat == 0 ? a.w0 : a.w1;
      wrow[mat][i] = col < a.m ? w.base + e * w.expert_bytes + col * w.row_bytes : nullptr;
    }
  }

  float acc[kMats][2][4][4] = {};
  for (uint32_t k0 = 0; k0 < k; k0 += kTileK) {
    uint4 lo{}, hi{};
    if (asrc) {
      const float4* src = reinterpret_cast<const float4*>(asrc + k0);
      const float4 v0 = src[0], v1 = src[1], v2 = src[2], v3 = src[3];
      lo = make_uint4(half_bits2(v0.x, v0.y, kF16), half_bits2(v0.z, v0.w, kF16), half_bits2(v1.x, v1.y, kF16),
                      half_bits2(v1.z, v1.w, kF16));
      hi = make_uint4(half_bits2(v2.x, v2.y, kF16), half_bits2(v2.z, v2.w, kF16), half_bits2(v3.x, v3.y, kF16),
                      half_bits2(v3.z, v3.w, kF16));
    }
    *reinterpret_cast<uint4*>(&as[arow][acol]) = lo;
    *reinterpret_cast<uint4*>(&as[arow][acol + 8]) = hi;
#pragma unroll
    for (int mat = 0; mat < kMats; ++mat)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint4 packed{};
        if (wrow[mat][i]) {
          if constexpr (T == DType::F16 || T == DType::BF16) {
            packed = *reinterpret_cast<const uint4*>(wrow[mat][i] + static_cast<size_t>(k0 + bcol[i]) * 2);
          } else {
            float v[8];
            decode8<T>(wrow[mat][i], k0 + bcol[i], k, v);
            packed = make_uint4(half_bits2(v[0], v[1], kF16), half_bits2(v[2], v[3], kF16),
                                half_bits2(v[4], v[5], kF16), half_bits2(v[6], v[7], kF16));
          }
        }
        *reinterpret_cast<uint4*>(&bs[mat][brow[i]][bcol[i]]) = packed;
      }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm + mi * 16 + g;
        af[mi][0] = *reinterpret_cast<const uint32_t*>(&as[r][kk + 2 * q]);
        af[mi][1] = *reinterpret_cast<const uint32_t*>(&as[r + 8][kk + 2 * q]);
        af[mi][2] = *reinterpret_cast<const uint32_t*>(&as[r][kk + 8 + 2 * q]);
        af[mi][3] = *reinterpret_cast<const uint32_t*>(&as[r + 8][kk + 8 + 2 * q]);
      }
#pragma unroll
      for (int mat = 0; mat < kMats; ++mat)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int c = wn + ni * 8 + g;
          const uint32_t b0 = *reinterpret_cast<const uint32_t*>(&bs[mat][c][kk + 2 * q]);
          const uint32_t b1 = *reinterpret_cast<const uint32_t*>(&bs[mat][c][kk + 8 + 2 * q]);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            if constexpr (kF16) {
              mma_f16_16816(acc[mat][mi][ni], af[mi], b0, b1);
            } else {
              mma_bf16_16816(acc[mat][mi][ni], af[mi], b0, b1);
            }
          }
        }
    }
    __syncthreads();
  }

#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int32_t pair = pair_of[wm + mi * 16 + g + 8 * half];
      if (pair < 0) continue;
      float* out = a.out + static_cast<int64_t>(pair) * a.m;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t col = n0 + wn + ni * 8 + 2 * q + c;
          if (col >= a.m) continue;
          const float gate = acc[0][mi][ni][2 * half + c];
          out[col] = glu_out<kGlu>(gate, kMats == 2 ? acc[kMats - 1][mi][ni][2 * half + c] : 0.0f);
        }
    }
}

template <class Fn>
void dispatch_glu(GemvGlu glu, Fn&& fn) {
  switch (glu) {
    case GemvGlu::None: fn(std::integral_constant<GemvGlu, GemvGlu::None>{}); break;
    case GemvGlu::Silu: fn(std::integral_constant<GemvGlu, GemvGlu::Silu>{}); break;
    case GemvGlu::GeluTanh: fn(std::integral_constant<GemvGlu, GemvGlu::GeluTanh>{}); break;
  }
}

}  // namespace

void expert_gemv(const ExpertMatmul& mm, const int32_t* ids, int64_t pairs, bool exact, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(pairs), blocks_for(mm.m, kGemvWarps));
  const bool known = dispatch_weight_dtype(mm.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    dispatch_glu(mm.glu, [&](auto glu_tag) {
      constexpr GemvGlu G = decltype(glu_tag)::value;
      if (exact) {
        launch_pdl("expert_gemv_kernel", expert_gemv_kernel<T, G, true>, grid, kGemvWarps * 32, stream, mm, ids);
      } else {
        launch_pdl("expert_gemv_kernel", expert_gemv_kernel<T, G, false>, grid, kGemvWarps * 32, stream, mm, ids);
      }
    });
  });
  CORVID_CHECK(known, "CUDA moe_experts: unsupported expert dtype ", dtype_name(mm.dtype));
}

void expert_down_sum(const ExpertMatmul& mm, const int32_t* ids, const float* weights, int64_t tokens, int slots,
                     bool exact, cudaStream_t stream) {
  CORVID_CHECK(mm.glu == GemvGlu::None && mm.a_div == 1 && slots >= 1 && slots <= kMaxSumItems,
               "CUDA moe_experts: the down projection takes pairs of 1 to 64 slots");
  const int rows_per_block = std::max(1, kGemvWarps / slots);
  const dim3 grid(static_cast<unsigned>(tokens), blocks_for(mm.m, rows_per_block));
  const bool known = dispatch_weight_dtype(mm.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if (exact) {
      launch_pdl("expert_down_sum_kernel", expert_down_sum_kernel<T, true>, grid, kGemvWarps * 32, stream, mm, ids,
                 weights, slots, rows_per_block, mm.out);
    } else {
      launch_pdl("expert_down_sum_kernel", expert_down_sum_kernel<T, false>, grid, kGemvWarps * 32, stream, mm, ids,
                 weights, slots, rows_per_block, mm.out);
    }
  });
  CORVID_CHECK(known, "CUDA moe_experts: unsupported expert dtype ", dtype_name(mm.dtype));
}

void expert_gemm(const ExpertMatmul& mm, const int32_t* tile_expert, const int32_t* rows, int64_t tiles,
                 cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(tiles), blocks_for(mm.m, kTileCols));
  const bool known = dispatch_weight_dtype(mm.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    dispatch_glu(mm.glu, [&](auto glu_tag) {
      constexpr GemvGlu G = decltype(glu_tag)::value;
      launch_pdl("expert_gemm_kernel", expert_gemm_kernel<T, G>, grid, kGemmThreads, stream, mm, tile_expert, rows);
    });
  });
  CORVID_CHECK(known, "CUDA moe_experts: unsupported expert dtype ", dtype_name(mm.dtype));
}

}  // namespace corvid::ops::cuda
