// Split-KV decode attention over the coded caches (q8 / q4 affine, fp8: kv_codec.cuh),
// decoding the codes in registers: no 16-bit copy of the cache is made.
//
// The shape is attention_decode.cu's: a block takes kTile keys at once for one (query,
// group of G query heads sharing a kv head, split), and
//   1. every thread issues its loads for the tile together: kSub threads a key, each a
//      contiguous quarter of the key's codes (32-bit words: 4 codes of 8 bits or 8 of
//      4) and the scale (and bias) of the group that quarter lies in; and for its
//      value dims (one word's worth) the codes and scales of the tile's keys it sums;
//   2. scores: each thread decodes its words once and dots them with the G heads' q
//      (in shared memory, pre-scaled); two shuffles finish a dot;
//   3. one warp per head folds the tile's scores into the online softmax;
//   4. each thread accumulates p * v for its dims from the words already loaded.
// Threads that share dims (different keys of a tile) add up at the end through shared
// memory; attention_combine merges the splits. The split count depends only on the
// extent, so a recorded decode step replays at any length.
//
// Why a kernel of its own: the plain kernel's 16-byte loads of whole elements do not
// fit rows of 68-, 36- or 20-byte groups (4-byte aligned only), and the fp32 kernels
// (attention.cu, a warp a key) read a coded cache at a fraction of the bandwidth
// (docs/kv-cache.md has the measurements).
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "corvid/ops/cuda/attention_decode.cuh"
#include "corvid/ops/cuda/kv_codec.cuh"
#include "corvid/ops/kv_turbo.h"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kSub = 4;                 // threads per key in the score phase
constexpr int kTile = kThreads / kSub;  // keys per tile (32)

// A format's scale and bias of one group (fp8: bias 0).
template <class C>
__device__ __forceinline__ float2 group_scale(const uint8_t* group) {
  if constexpr (__is_same(C, KvFp8)) {
    return make_float2(__ldg(reinterpret_cast<const float*>(group + C::kCodeBytes)), 0.0f);
  } else {
    const uint32_t w = __ldg(reinterpret_cast<const unsigned int*>(group + C::kCodeBytes));
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
}

// The values of one 32-bit word of codes (4 for 8-bit codes, 8 for 4-bit), given the
// group's scale and bias.
template <class C>
__device__ __forceinline__ void decode_word(uint32_t w, float2 sb, float (&out)[32 / C::bits]) {
  if constexpr (__is_same(C, KvFp8)) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * e)), __NV_E4M3);
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      out[2 * e] = sb.x * f.x;
      out[2 * e + 1] = sb.x * f.y;
    }
  } else {
    constexpr uint32_t kMask = (1u << C::bits) - 1;
#pragma unroll
    for (int e = 0; e < 32 / C::bits; ++e)
      out[e] = fmaf(sb.x, static_cast<float>((w >> (C::bits * e)) & kMask), sb.y);
  }
}

template <int D, int G, class Kv, class C>
__global__ void __launch_bounds__(kThreads) coded_decode_kernel(
    const float* __restrict__ q, const uint8_t* __restrict__ k_cache, const uint8_t* __restrict__ v_cache, Kv kv,
    const int32_t* __restrict__ positions, float scale, int64_t window, float* __restrict__ partial,
    float* __restrict__ out, int n_heads, int n_kv_heads, int splits, float* __restrict__ lse) {
  constexpr int kPerWord = 32 / C::bits;                 // codes in a 32-bit word
  constexpr int kHeadBytes = D / C::kGroup * C::kBlockBytes;
  constexpr int kSubDims = D / kSub;                     // key dims a thread dots
  constexpr int kKWords = kSubDims / kPerWord;
  constexpr int kKGroups = kSubDims > C::kGroup ? kSubDims / C::kGroup : 1;  // groups those dims span
  constexpr int kRowThreads = D / kPerWord;              // threads covering a value row, a word each
  constexpr int kKeyGroups = kThreads / kRowThreads;     // threads sharing dims split the tile's keys
  constexpr int kKeysPerThread = kTile / kKeyGroups;
  static_assert(kSubDims % kPerWord == 0 && kThreads % kRowThreads == 0 && kTile % kKeyGroups == 0, "head_dim");
  __shared__ __align__(16) float qs[G][D];
  __shared__ float p[G][kTile];
  __shared__ float corr_s[G];
  __shared__ float acc_s[kKeyGroups > 1 ? kKeyGroups - 1 : 1][G][kKeyGroups > 1 ? kPerWord * kRowThreads : 1];
  __shared__ float m_s[G], l_s[G];

  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int t = blockIdx.x, h0 = blockIdx.y * G, split = blockIdx.z;
  const int kvh = h0 / (n_heads / n_kv_heads);
  const int64_t pos = positions[t];  // a host input: readable before pdl_wait
  const int64_t first = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
  const int64_t tiles = (pos - first + kTile) / kTile;
  const int my_key = tid / kSub, sub = tid % kSub;
  const int row_thread = tid % kRowThreads, key_group = tid / kRowThreads;
  const int dim0 = row_thread * kPerWord;  // this thread's value dims
  pdl_wait();  // launched with launch_pdl: q and this step's cache rows from here on
  for (int i = tid; i < G * D; i += kThreads)
    qs[i / D][i % D] = q[(static_cast<int64_t>(t) * n_heads + h0) * D + i] * scale;

  float m[(G + kWarps - 1) / kWarps], l[(G + kWarps - 1) / kWarps];
#pragma unroll
  for (int i = 0; i < (G + kWarps - 1) / kWarps; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  float acc[G][kPerWord];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < kPerWord; ++e) acc[g][e] = 0.0f;
  __syncthreads();

  for (int64_t tile = split; tile < tiles; tile += splits) {
    const int64_t tile0 = first + tile * kTile, end = min(pos, tile0 + kTile - 1);
    // 1. Loads: this thread's quarter of its key, and its dims of its keys' values.
    const int64_t j = tile0 + my_key;
    uint32_t kw[kKWords];
    float2 ksb[kKGroups];
#pragma unroll
    for (int w = 0; w < kKWords; ++w) kw[w] = 0;
#pragma unroll
    for (int g = 0; g < kKGroups; ++g) ksb[g] = make_float2(0.0f, 0.0f);
    if (j <= end) {
      const uint8_t* row = k_cache + (kv.row(t, j) * n_kv_heads + kvh) * kHeadBytes;
#pragma unroll
      for (int w = 0; w < kKWords; ++w) {
        const int d = sub * kSubDims + w * kPerWord;
        kw[w] = __ldg(reinterpret_cast<const unsigned int*>(row + d / C::kGroup * C::kBlockBytes +
                                                            d % C::kGroup * C::bits / 8));
      }
#pragma unroll
      for (int g = 0; g < kKGroups; ++g)
        ksb[g] = group_scale<C>(row + ((sub * kSubDims) / C::kGroup + g) * C::kBlockBytes);
    }
    uint32_t vw[kKeysPerThread];
    float2 vsb[kKeysPerThread];
#pragma unroll
    for (int i = 0; i < kKeysPerThread; ++i) {
      const int64_t jv = tile0 + key_group + i * kKeyGroups;
      vw[i] = 0;
      vsb[i] = make_float2(0.0f, 0.0f);
      if (jv <= end) {
        const uint8_t* group = v_cache + (kv.row(t, jv) * n_kv_heads + kvh) * kHeadBytes +
                               dim0 / C::kGroup * C::kBlockBytes;
        vw[i] = __ldg(reinterpret_cast<const unsigned int*>(group + dim0 % C::kGroup * C::bits / 8));
        vsb[i] = group_scale<C>(group);
      }
    }
    // 2. Scores of this key for the G heads.
    float sc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sc[g] = 0.0f;
#pragma unroll
    for (int w = 0; w < kKWords; ++w) {
      const int d0 = sub * kSubDims + w * kPerWord;
      float kf[kPerWord];
      decode_word<C>(kw[w], ksb[(w * kPerWord) / C::kGroup], kf);
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) sc[g] = fmaf(qs[g][d0 + e], kf[e], sc[g]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = sc[g];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (sub == 0) p[g][my_key] = j <= end ? s : -INFINITY;
    }
    __syncthreads();
    // 3. Softmax update, one warp per head (lane = key of the tile).
#pragma unroll
    for (int i = 0; i < (G + kWarps - 1) / kWarps; ++i) {
      const int g = warp + i * kWarps;
      if (g < G) {
        const float s = p[g][lane];
        const float m_new = fmaxf(m[i], warp_max(s));  // finite: the tile's first key is valid
        const float e = expf(s - m_new);
        const float sum = warp_sum(e);
        const float correction = expf(m[i] - m_new);
        l[i] = l[i] * correction + sum;
        m[i] = m_new;
        p[g][lane] = e;
        if (lane == 0) corr_s[g] = correction;
      }
    }
    __syncthreads();
    // 4. Accumulate p * v.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float c = corr_s[g];
#pragma unroll
      for (int e = 0; e < kPerWord; ++e) acc[g][e] *= c;
    }
#pragma unroll
    for (int i = 0; i < kKeysPerThread; ++i) {
      const int key = key_group + i * kKeyGroups;
      float vf[kPerWord];
      decode_word<C>(vw[i], vsb[i], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float w = p[g][key];
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) acc[g][e] = fmaf(w, vf[e], acc[g][e]);
      }
    }
    __syncthreads();  // the next tile rewrites p and corr_s
  }

  // Key groups 1.. hand their sums to key group 0, which adds them in order.
  if constexpr (kKeyGroups > 1) {
    if (key_group > 0) {
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) acc_s[key_group - 1][g][dim0 + e] = acc[g][e];
    }
    __syncthreads();
    if (key_group == 0) {
#pragma unroll
      for (int g = 0; g < G; ++g)
        for (int k = 0; k < kKeyGroups - 1; ++k)
#pragma unroll
          for (int e = 0; e < kPerWord; ++e) acc[g][e] += acc_s[k][g][dim0 + e];
    }
  }
#pragma unroll
  for (int i = 0; i < (G + kWarps - 1) / kWarps; ++i) {
    const int g = warp + i * kWarps;
    if (g < G && lane == 0) {
      m_s[g] = m[i];
      l_s[g] = l[i];
    }
  }
  __syncthreads();
  if (key_group != 0) return;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t head_row = static_cast<int64_t>(t) * n_heads + h0 + g;
    if (splits == 1) {
      const float inv = 1.0f / l_s[g];
#pragma unroll
      for (int e = 0; e < kPerWord; ++e) out[head_row * D + dim0 + e] = acc[g][e] * inv;
      if (lse && tid == 0) lse[head_row] = m_s[g] + logf(l_s[g]);  // -inf: no key seen
    } else {
      float* row = partial + (head_row * splits + split) * (D + 2);
      if (tid == 0) {
        row[0] = m_s[g];
        row[1] = l_s[g];
      }
#pragma unroll
      for (int e = 0; e < kPerWord; ++e) row[2 + dim0 + e] = acc[g][e];
    }
  }
}

template <int D, int G, class Kv, class C>
void launch(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
            const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out, float* lse) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), n_kv_heads = k_cache.dim(1);
  auto* kernel = coded_decode_kernel<D, G, Kv, C>;
  static const int resident = [kernel] {
    int blocks = 0;
    CORVID_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
    return blocks;
  }();
  const int splits = decode_split_count(ctx, n * n_heads / G, extent, resident);
  float* partial =
      splits > 1 ? static_cast<float*>(ctx.scratch(static_cast<size_t>(n * n_heads * splits * (D + 2)) * 4)) : nullptr;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(n_heads / G), static_cast<unsigned>(splits));
  launch_pdl("coded_decode_kernel", kernel, grid, dim3(kThreads), ctx.stream, q.ptr<float>(),
             static_cast<const uint8_t*>(k_cache.data), static_cast<const uint8_t*>(v_cache.data), kv, pos, scale,
             window, partial, out.ptr<float>(), static_cast<int>(n_heads), static_cast<int>(n_kv_heads), splits, lse);
  if (splits > 1) attention_combine(ctx, partial, out, splits, lse);
}

template <int D, class Kv, class C>
void launch_group(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                  const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out, float* lse) {
  const int64_t group = q.dim(1) / k_cache.dim(1);
  if (group % 8 == 0) launch<D, 8, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse);
  else if (group % 4 == 0) launch<D, 4, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse);
  else if (group % 2 == 0) launch<D, 2, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse);
  else launch<D, 1, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse);
}

}  // namespace

template <class Kv>
bool attention_decode_coded(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                            const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                            float* lse) {
  const int64_t head_dim = q.dim(2);
  // TurboQuant's codes (and its pairs of two formats) take the fp32 kernels for now.
  if (kv_dtype_is_plain(k_cache.dtype) || v_cache.dtype != k_cache.dtype || ops::kv_turbo::is_turbo(k_cache.dtype) ||
      !(head_dim == 64 || head_dim == 128 || head_dim == 256))
    return false;
  dispatch_kv_format(k_cache.dtype, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (kv_is_coded<C> && !kv_is_turbo<C>) {
      switch (head_dim) {
        case 64: launch_group<64, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse); return;
        case 128: launch_group<128, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse); return;
        default: launch_group<256, Kv, C>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse); return;
      }
    }
  });
  return true;
}

template bool attention_decode_coded<ContiguousKv>(Context&, const Tensor&, const Tensor&, const Tensor&,
                                                   const ContiguousKv&, const int32_t*, int64_t, float, int64_t,
                                                   const Tensor&, float*);
template bool attention_decode_coded<PagedKv>(Context&, const Tensor&, const Tensor&, const Tensor&, const PagedKv&,
                                              const int32_t*, int64_t, float, int64_t, const Tensor&, float*);

}  // namespace corvid::ops::cuda
