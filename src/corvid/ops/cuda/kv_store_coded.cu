// Stores of keys and values into the coded KV caches (kv_codec.cuh): one warp encodes
// one group of 64 or 32 values, lane l holding values l * V .. l * V + V - 1 (V = group
// / 32), so the group's extremes are two warp reductions and each lane writes its own
// codes. The arithmetic is the CPU's (ops/kv_affine.cc, ops/kv_fp8.cc, ops/kv_turbo.cc)
// step for step, IEEE divisions included, so the bytes are the CPU's.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "corvid/ops/cuda/kv_codec.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// mlx's affine quantize of one group (ops/kv_affine.cc quantize_group).
template <class C>
__device__ __forceinline__ void encode_affine(const float* x, uint8_t* dst, int lane) {
  constexpr int V = C::kGroup / 32;
  constexpr float kBins = static_cast<float>((1 << C::bits) - 1);
  float w[V];
  float lo = INFINITY, hi = -INFINITY;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    w[i] = __half2float(__float2half_rn(x[lane * V + i]));
    lo = fminf(lo, w[i]);
    hi = fmaxf(hi, w[i]);
  }
  lo = warp_min(lo);
  hi = warp_max(hi);
  const bool mask = fabsf(lo) > fabsf(hi);
  float scale = fmaxf(__fdiv_rn(__fsub_rn(hi, lo), kBins), 1e-7f);
  scale = mask ? scale : -scale;
  const float edge = mask ? lo : hi;
  const float q0 = rintf(__fdiv_rn(edge, scale));
  float bias = 0.0f;
  if (q0 != 0.0f) {
    scale = __fdiv_rn(edge, q0);
    bias = edge;
  }
  uint32_t code[V];
#pragma unroll
  for (int i = 0; i < V; ++i)
    code[i] = static_cast<uint32_t>(fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(w[i], bias), scale)), 0.0f), kBins));
  if constexpr (C::bits == 8) {
#pragma unroll
    for (int i = 0; i < V; ++i) dst[lane * V + i] = static_cast<uint8_t>(code[i]);
  } else if constexpr (V == 2) {
    dst[lane] = static_cast<uint8_t>(code[0] | (code[1] << 4));
  } else {  // one value a lane: even lanes take their odd neighbour's code as the high nibble
    const uint32_t next = __shfl_down_sync(0xffffffffu, code[0], 1);
    if (lane % 2 == 0) dst[lane / 2] = static_cast<uint8_t>(code[0] | (next << 4));
  }
  if (lane == 0) *reinterpret_cast<__half2*>(dst + C::kCodeBytes) = __halves2half2(__float2half_rn(scale),
                                                                                    __float2half_rn(bias));
}

// FP8 of one group (ops/kv_fp8.cc quantize): scale max|x| / 448, codes of x / scale.
__device__ __forceinline__ void encode_fp8(const float* x, uint8_t* dst, int lane) {
  const float x0 = x[2 * lane], x1 = x[2 * lane + 1];
  const float amax = warp_max(fmaxf(fmaxf(0.0f, fabsf(x0)), fabsf(x1)));
  const float scale = __fdiv_rn(amax, 448.0f);
  auto code = [&](float v) -> uint32_t {
    return scale > 0.0f ? __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3) : 0u;
  };
  *reinterpret_cast<uint16_t*>(dst + 2 * lane) = static_cast<uint16_t>(code(x0) | (code(x1) << 8));
  if (lane == 0) *reinterpret_cast<float*>(dst + KvFp8::kCodeBytes) = scale;
}

// TurboQuant's codes of one group of 64 (ops/kv_turbo.cc quantize): lane j codes values j
// and j + 32; the bit stream is assembled from one ballot per code bit. warp_sum of lane j's
// pair adds in kv_turbo::group_sum's order: its butterfly's level k adds lanes j and j + k.
template <int B>
__device__ __forceinline__ void encode_turbo(const float* x, uint8_t* dst, int lane) {
  const float x0 = x[lane], x1 = x[lane + 32];
  const float norm = __fsqrt_rn(warp_sum(__fadd_rn(__fmul_rn(x0, x0), __fmul_rn(x1, x1))));
  uint32_t c0 = 0, c1 = 0;
  float scale = 0.0f;
  if (norm > 0.0f) {  // the same for every lane
    const float to_unit = __fdiv_rn(8.0f, norm);  // sqrt(64) / |x|
    const float u0 = __fmul_rn(x0, to_unit), u1 = __fmul_rn(x1, to_unit);
#pragma unroll
    for (int b = 0; b < (1 << B) - 1; ++b) {
      c0 += u0 > kTurboBounds[B - 2][b] ? 1u : 0u;
      c1 += u1 > kTurboBounds[B - 2][b] ? 1u : 0u;
    }
    const float v0 = kTurboCentroids[B - 2][c0], v1 = kTurboCentroids[B - 2][c1];
    scale = __fdiv_rn(norm, __fsqrt_rn(warp_sum(__fadd_rn(__fmul_rn(v0, v0), __fmul_rn(v1, v1)))));
  }
  uint32_t low[B], high[B];  // bit k of the codes of values 0..31 and 32..63
#pragma unroll
  for (int k = 0; k < B; ++k) {
    low[k] = __ballot_sync(0xffffffffu, (c0 >> k) & 1u);
    high[k] = __ballot_sync(0xffffffffu, (c1 >> k) & 1u);
  }
  if (lane < KvTurbo<B>::kCodeBytes) {
    uint32_t byte = 0;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const int s = 8 * lane + p, j = s / B, k = s % B;
      uint32_t mask = 0;
#pragma unroll
      for (int kk = 0; kk < B; ++kk)
        if (kk == k) mask = j < 32 ? low[kk] >> j : high[kk] >> (j - 32);
      byte |= (mask & 1u) << p;
    }
    dst[lane] = static_cast<uint8_t>(byte);
  }
  if (lane == 0) *reinterpret_cast<float*>(dst + KvTurbo<B>::kCodeBytes) = scale;
}

// One tensor's groups, or two tensors' of one format: tensor i is x[i] into cache[i].
struct StoreTensors {
  const float* x[2];
  uint8_t* cache[2];
};

// Warp w of block (x, token y) takes item x * kWarps + w: tensor 0's groups first, then
// tensor 1's.
template <class C>
__global__ void __launch_bounds__(kThreads) store_kv_coded_kernel(StoreTensors tensors, int count,
                                                                  const int32_t* __restrict__ rows, int kv_heads,
                                                                  int head_dim) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();               // launched with launch_pdl: the projection's output first
  const int t = blockIdx.y, lane = threadIdx.x % 32;
  const int groups = head_dim / C::kGroup, per_tensor = kv_heads * groups;
  const int item = blockIdx.x * kWarps + threadIdx.x / 32;
  const int32_t row = rows[t];
  if (item >= count * per_tensor || row < 0) return;
  const int which = item >= per_tensor ? 1 : 0;
  const int g = item - which * per_tensor;  // head g / groups, its group g % groups
  const float* x = tensors.x[which] + static_cast<int64_t>(t) * kv_heads * head_dim + g * C::kGroup;
  uint8_t* dst = tensors.cache[which] + (static_cast<int64_t>(row) * per_tensor + g) * C::kBlockBytes;
  if constexpr (__is_same(C, KvFp8)) encode_fp8(x, dst, lane);
  else if constexpr (kv_is_turbo<C>) encode_turbo<C::bits>(x, dst, lane);
  else encode_affine<C>(x, dst, lane);
}

void launch_store(Context& ctx, DType t, StoreTensors tensors, int count, const int32_t* rows, int64_t n, int kv_heads,
                  int head_dim) {
  dispatch_kv_format(t, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (kv_is_coded<C>) {
      const int64_t items = int64_t{count} * kv_heads * (head_dim / C::kGroup);
      launch_pdl("store_kv_coded_kernel", store_kv_coded_kernel<C>,
                 dim3(blocks_for(items, kWarps), static_cast<unsigned>(n)), dim3(kThreads), ctx.stream, tensors, count,
                 rows, kv_heads, head_dim);
    } else {
      fail("CUDA store_kv_coded: ", dtype_name(t), " is not a coded KV format");
    }
  });
}

}  // namespace

void store_kv_coded(Context& ctx, DType kt, DType vt, const float* k, const float* v, const int32_t* rows, int64_t n,
                    int kv_heads, int head_dim, void* k_cache, void* v_cache) {
  auto* kc = static_cast<uint8_t*>(k_cache);
  auto* vc = static_cast<uint8_t*>(v_cache);
  if (kt == vt) {  // one launch for both
    launch_store(ctx, kt, StoreTensors{{k, v}, {kc, vc}}, 2, rows, n, kv_heads, head_dim);
    return;
  }
  launch_store(ctx, kt, StoreTensors{{k, nullptr}, {kc, nullptr}}, 1, rows, n, kv_heads, head_dim);
  launch_store(ctx, vt, StoreTensors{{v, nullptr}, {vc, nullptr}}, 1, rows, n, kv_heads, head_dim);
}

}  // namespace corvid::ops::cuda
