// Decode attention (a few queries, each over its whole KV history) on the GPU:
// split-KV with key tiles processed by the whole block at once.
//
// Why: the earlier decode kernels gave each warp one key at a time (lanes over the
// head's dims): per key a warp shuffle reduction, two exponentials and the next key's
// loads only after all of it, so a warp spent ~1 us per key and decode at 4096 tokens
// of context read its KV cache at ~0.6 TB/s (1.7 ms of a 4.2 ms token,
// docs/benchmarks.md). Here a block takes kTile keys at once:
//   1. every thread issues its loads for the tile together: a quarter of one key's
//      row (kSub threads per key) and, for the dims it owns, the value rows of all
//      the tile's keys;
//   2. scores: each thread dots its quarter of the key with the G query heads that
//      share this kv head (q in shared memory, pre-scaled), two shuffles finish a dot;
//   3. one warp per head turns the tile's scores into the online softmax update
//      (running max m, running sum l, a correction for the accumulators);
//   4. each thread accumulates p * v for its dims from the values already in registers.
// A block covers one (query, kv head, split); splits divide the history so that the
// GPU has several blocks per SM, and attention_combine merges the splits' (m, l, acc).
// The split count depends only on the cache's extent (not the position), so a
// recorded decode step replays at any length.
// Under programmatic dependent launch a block requests its first tile's keys and
// values before waiting for the step's earlier kernels: only the rows this step writes
// (the queries' own positions) must wait; Q4_0 decode at 128 tokens of context went
// 502.6 -> 547.2 tok/s with this and ops::rope_store_kv (docs/benchmarks.md). The
// splits are as many as the GPU holds blocks at once, so all of them prefetch.
// One query may also arrive with its q and new key unrotated (attention_decode_rope, the
// decode step's ops::rope_store_kv_attention): every block rotates its q heads (cosines
// and sines made before waiting), the block whose last tile holds the query's own row
// rotates the new key into shared memory, reads that row from there and stores it in the
// cache. rope_store_kv's launch, and the step's wait for it, go: Q4_0 decode 582 -> 593
// tok/s, 503 -> 513 at 4096 tokens of context (docs/benchmarks.md). A first version that
// loaded q and the new row one after the other, with a branch in the tile loads, lost 4%.
// The cache may hold F32, F16 or BF16 (kv_elem.cuh). Loads stay raw words in registers
// until used, so a 16-bit cache halves the bytes and the registers a tile takes:
// more blocks fit, and at 4096 tokens of context decode went 455.7 (F32) -> 485.7 tok/s.
#include <algorithm>
#include <cmath>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/attention_decode.cuh"
#include "corvid/ops/cuda/kv_elem.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/rope.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kSub = 4;                   // threads per key in the score phase
constexpr int kTile = kThreads / kSub;    // keys per tile (32)
constexpr int kKeysPerSplit = kTile;      // a split is worth a block from this many cache rows on
constexpr int kMaxSplits = 128;  // attention_combine's limit

// kRope: one query whose q and new key arrive unrotated (attention_decode_rope, nr).
template <int D, int G, class Kv, class E, bool kRope>
__global__ void __launch_bounds__(kThreads, sizeof(E) == 2 && D == 128 ? 6 : 1) decode_attention_kernel(
    const float* __restrict__ q, const E* __restrict__ k_cache, const E* __restrict__ v_cache, Kv kv,
    const int32_t* __restrict__ positions, float scale, int64_t window, float* __restrict__ partial,
    float* __restrict__ out, int n_heads, int n_kv_heads, int splits, const NewKvRow nr, float* __restrict__ lse) {
  // Loads stay in registers as raw 32-bit words of cache elements (a 16-bit cache takes
  // half the registers of an F32 one, so more blocks fit on an SM) and become floats
  // where they are used.
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(E));   // elements in a 32-bit word
  constexpr int kPer16 = 4 * kPerWord;                        // elements in 16 bytes
  constexpr int kSubDims = D / kSub;                          // dims of a key one thread dots
  constexpr int kKChunks = kSubDims / kPer16;                 // its 16-byte loads
  // Value dims per thread: one 32-bit word at least (two dims of a 16-bit cache).
  constexpr int kDimsPerThread = D > kThreads * kPerWord ? D / kThreads : kPerWord;
  constexpr int kVWords = kDimsPerThread / kPerWord;
  constexpr int kKeyGroups = kThreads * kDimsPerThread / D;  // threads sharing dims split the tile's keys
  constexpr int kTileKeysPerThread = kTile / kKeyGroups;
  static_assert(kSubDims % kPer16 == 0 && kThreads % (D / kDimsPerThread) == 0 && kTile % kKeyGroups == 0,
                "head_dim");
  __shared__ __align__(16) float qs[G][D];
  __shared__ float p[G][kTile];
  __shared__ float corr_s[G];
  __shared__ float acc_s[kKeyGroups > 1 ? kKeyGroups : 1][G][kKeyGroups > 1 ? D : 1];

  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int t = blockIdx.x, h0 = blockIdx.y * G, split = blockIdx.z;
  const int kvh = h0 / (n_heads / n_kv_heads);
  // Positions and block tables are host inputs (uploaded before the step), not an
  // earlier kernel's output: they may be read before pdl_wait.
  const int64_t pos = positions[t];
  const int64_t first = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
  // The history's tiles are dealt round-robin to the splits (tile k to split k % splits),
  // so every split has work once there are as many tiles as splits; a split without
  // any keeps max -inf and weighs nothing in the combine.
  const int64_t tiles = (pos - first + kTile) / kTile;  // ceil(len / kTile), len = pos - first + 1
  const int64_t kv_stride = static_cast<int64_t>(n_kv_heads) * D;
  const E* k_head = k_cache + static_cast<int64_t>(kvh) * D;
  const E* v_head = v_cache + static_cast<int64_t>(kvh) * D;
  const int my_key = tid / kSub, sub = tid % kSub;
  const int dim0 = (tid % (D / kDimsPerThread)) * kDimsPerThread, key_group = tid / (D / kDimsPerThread);
  // kRope: the rotation's cosines and sines depend on the position alone (made before
  // waiting); the new key and value, as the cache will hold them, for the block whose
  // tiles reach the query's own row (it reads them from here).
  __shared__ float cos_s[kRope ? D / 2 : 1], sin_s[kRope ? D / 2 : 1];
  __shared__ __align__(16) E new_k[kRope ? D : 1];
  __shared__ __align__(16) E new_v[kRope ? D : 1];
  if constexpr (kRope) {
    for (int i = tid; i < nr.half; i += kThreads)
      rope_cos_sin(static_cast<int32_t>(pos), nr.inv_freq[i], nr.attention_factor, cos_s[i], sin_s[i]);
  }

  // 1. Loads of a tile's rows j in [lo, hi] (the others keep what they hold): this
  // thread's quarter of its key (16-byte chunks sub + kSub * c, so the kSub threads of a
  // key read one contiguous stretch per instruction), and its dims of every key it
  // accumulates.
  uint4 kr[kKChunks];                         // chunk c: dims kPer16 * (sub + kSub * c) + [0, kPer16)
  uint32_t vr[kTileKeysPerThread][kVWords];   // dims dim0 + [0, kDimsPerThread) of key_group + i * kKeyGroups
  auto load_rows = [&](int64_t tile0, int64_t lo, int64_t hi) {
    const int64_t j = tile0 + my_key;
    if (j >= lo && j <= hi) {
      const uint4* kp = reinterpret_cast<const uint4*>(k_head + kv.row(t, j) * kv_stride) + sub;
#pragma unroll
      for (int c = 0; c < kKChunks; ++c) kr[c] = __ldg(kp + kSub * c);
    }
#pragma unroll
    for (int i = 0; i < kTileKeysPerThread; ++i) {
      const int64_t jv = tile0 + key_group + i * kKeyGroups;
      if (jv >= lo && jv <= hi) {
        const uint32_t* vp = reinterpret_cast<const uint32_t*>(v_head + kv.row(t, jv) * kv_stride + dim0);
        if constexpr (kVWords == 2) {
          const uint2 w = __ldg(reinterpret_cast<const uint2*>(vp));
          vr[i][0] = w.x;
          vr[i][1] = w.y;
        } else {
#pragma unroll
          for (int w = 0; w < kVWords; ++w) vr[i][w] = __ldg(vp + w);
        }
      }
    }
  };
  // kRope: the query's own row (in the last tile, not loaded from the cache) from shared memory.
  auto take_new_row = [&](int64_t tile0) {
    if (tile0 + my_key == pos) {
      const uint4* kp = reinterpret_cast<const uint4*>(new_k) + sub;
#pragma unroll
      for (int c = 0; c < kKChunks; ++c) kr[c] = kp[kSub * c];
    }
#pragma unroll
    for (int i = 0; i < kTileKeysPerThread; ++i) {
      if (tile0 + key_group + i * kKeyGroups == pos) {
        const uint32_t* vp = reinterpret_cast<const uint32_t*>(new_v + dim0);
#pragma unroll
        for (int w = 0; w < kVWords; ++w) vr[i][w] = vp[w];
      }
    }
  };
  auto clear_rows = [&] {
#pragma unroll
    for (int c = 0; c < kKChunks; ++c) kr[c] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < kTileKeysPerThread; ++i)
#pragma unroll
      for (int w = 0; w < kVWords; ++w) vr[i][w] = 0;
  };
  // The first tile's rows that no kernel of this step writes are requested before
  // waiting for the step's earlier kernels: this step's new rows are the calls'
  // positions, and for query t all of them are >= pos - (n - 1) (one sequence: n
  // consecutive positions; several: each query's own row only).
  const int64_t written_from = pos - (static_cast<int64_t>(gridDim.x) - 1);
  const int64_t first_tile0 = first + static_cast<int64_t>(split) * kTile;  // the split's first tile
  const int64_t first_end = min(pos, first_tile0 + kTile - 1);
  clear_rows();
  if (split < tiles) load_rows(first_tile0, first_tile0, min(first_end, written_from - 1));
  pdl_wait();  // launched with launch_pdl: q and the new cache rows from here on
  if constexpr (kRope) {
    // q's elements with their rope partners, and (the block whose last tile holds the
    // query's own row: split (tiles - 1) % splits) the new key's and value, all requested
    // at once; rotated once cos_s is complete; the new row stored by one block a kv head.
    constexpr int kQ = (G * D + kThreads - 1) / kThreads, kK = (D + kThreads - 1) / kThreads;
    const bool holds_new_row = split == (tiles - 1) % splits;
    const float* q_group = q + (static_cast<int64_t>(t) * n_heads + h0) * D;
    const float* k_in = nr.k + static_cast<int64_t>(kvh) * D;
    const float* v_in = nr.v + static_cast<int64_t>(kvh) * D;
    float qd[kQ], qp[kQ], kd[kK], kp[kK], vd[kK];
#pragma unroll
    for (int e = 0; e < kQ; ++e) {
      const int i = tid + e * kThreads;
      if (i < G * D) {
        qd[e] = q_group[i];
        qp[e] = q_group[i - i % D + rope_partner(i % D, nr.half, nr.interleaved)];
      }
    }
    if (holds_new_row) {
#pragma unroll
      for (int e = 0; e < kK; ++e) {
        const int d = tid + e * kThreads;
        if (d < D) {
          kd[e] = k_in[d];
          kp[e] = k_in[rope_partner(d, nr.half, nr.interleaved)];
          vd[e] = v_in[d];
        }
      }
    }
    __syncthreads();  // cos_s and sin_s
#pragma unroll
    for (int e = 0; e < kQ; ++e) {
      const int i = tid + e * kThreads;
      if (i < G * D)
        qs[i / D][i % D] = rope_element(qd[e], qp[e], i % D, nr.half, nr.interleaved, cos_s, sin_s) * scale;
    }
    if (holds_new_row) {
#pragma unroll
      for (int e = 0; e < kK; ++e) {
        const int d = tid + e * kThreads;
        if (d < D) {
          new_k[d] = kv_encode<E>(rope_element(kd[e], kp[e], d, nr.half, nr.interleaved, cos_s, sin_s));
          new_v[d] = kv_encode<E>(vd[e]);
        }
      }
      __syncthreads();  // new_k and new_v (holds_new_row is the same for the whole block)
      if (h0 % (n_heads / n_kv_heads) == 0) {
        const int64_t at = kv.row(t, pos) * kv_stride + static_cast<int64_t>(kvh) * D;
        for (int d = tid; d < D; d += kThreads) {
          static_cast<E*>(nr.k_cache)[at + d] = new_k[d];
          static_cast<E*>(nr.v_cache)[at + d] = new_v[d];
        }
      }
    }
  } else {
    // The rows this step wrote are requested first, so their loads overlap q's.
    if (split < tiles) load_rows(first_tile0, max(first_tile0, written_from), first_end);
    for (int i = tid; i < G * D; i += kThreads)
      qs[i / D][i % D] = q[(static_cast<int64_t>(t) * n_heads + h0) * D + i] * scale;
  }

  // Online-softmax state of head g lives in warp g % kWarps (every lane holds it).
  float m[(G + kWarps - 1) / kWarps], l[(G + kWarps - 1) / kWarps];
#pragma unroll
  for (int i = 0; i < (G + kWarps - 1) / kWarps; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  float acc[G][kDimsPerThread];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < kDimsPerThread; ++e) acc[g][e] = 0.0f;
  __syncthreads();

  for (int64_t tile = split; tile < tiles; tile += splits) {
    const int64_t tile0 = first + tile * kTile, end = min(pos, tile0 + kTile - 1);
    const int64_t j = tile0 + my_key;
    if (tile != split) {  // the first tile is in registers already
      clear_rows();
      load_rows(tile0, tile0, kRope ? min(end, pos - 1) : end);  // kRope: row pos comes from take_new_row
    }
    if (kRope && tile == tiles - 1) take_new_row(tile0);
    // 2. Scores of this key for the G heads: each loaded word becomes floats once, used
    // by every head right away (converting all of a tile first would hold it as floats).
    float sc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sc[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < kKChunks; ++c) {
      const int d0 = kPer16 * (sub + kSub * c);  // the four threads of a key read adjacent stretches of q
      const uint32_t words[4] = {kr[c].x, kr[c].y, kr[c].z, kr[c].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float kf[kPerWord];
        kv_unpack<E>(words[w], kf);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int e = 0; e < kPerWord; ++e) sc[g] = fmaf(qs[g][d0 + w * kPerWord + e], kf[e], sc[g]);
      }
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
        const float big = warp_max(s);
        const float m_new = fmaxf(m[i], big);  // finite: the tile's first key is always valid
        const float e = expf(s - m_new);       // 0 for the invalid keys' -inf
        const float sum = warp_sum(e);
        const float correction = expf(m[i] - m_new);  // 0 on the first tile (m = -inf)
        l[i] = l[i] * correction + sum;
        m[i] = m_new;
        p[g][lane] = e;
        if (lane == 0) corr_s[g] = correction;
      }
    }
    __syncthreads();
    // 4. Accumulate p * v (each value word converted once, for every head).
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float c = corr_s[g];
#pragma unroll
      for (int e = 0; e < kDimsPerThread; ++e) acc[g][e] *= c;
    }
#pragma unroll
    for (int i = 0; i < kTileKeysPerThread; ++i) {
      const int key = key_group + i * kKeyGroups;
#pragma unroll
      for (int v = 0; v < kVWords; ++v) {
        float vf[kPerWord];
        kv_unpack<E>(vr[i][v], vf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float w = p[g][key];
#pragma unroll
          for (int e = 0; e < kPerWord; ++e) acc[g][v * kPerWord + e] = fmaf(w, vf[e], acc[g][v * kPerWord + e]);
        }
      }
    }
    __syncthreads();  // the next tile rewrites p and corr_s
  }

  // Threads that share dims (kKeyGroups > 1: head_dim < 128, or a 16-bit cache's two
  // dims a thread below 256) add up their key groups.
  if constexpr (kKeyGroups > 1) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < kDimsPerThread; ++e) acc_s[key_group][g][dim0 + e] = acc[g][e];
    __syncthreads();
    if (key_group == 0) {
#pragma unroll
      for (int g = 0; g < G; ++g)
        for (int k = 1; k < kKeyGroups; ++k)
#pragma unroll
          for (int e = 0; e < kDimsPerThread; ++e) acc[g][e] += acc_s[k][g][dim0 + e];
    }
  }
  // m and l of every head, from their warps to everyone.
  __shared__ float m_s[G], l_s[G];
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
      for (int e = 0; e < kDimsPerThread; ++e) out[head_row * D + dim0 + e] = acc[g][e] * inv;
      if (lse && tid == 0) lse[head_row] = m_s[g] + logf(l_s[g]);  // -inf: no key seen
    } else {
      float* row = partial + (head_row * splits + split) * (D + 2);
      if (tid == 0) {
        row[0] = m_s[g];
        row[1] = l_s[g];
      }
#pragma unroll
      for (int e = 0; e < kDimsPerThread; ++e) row[2 + dim0 + e] = acc[g][e];
    }
  }
}

// rope: null for attention over rows already in the cache, else the new row the kernel
// rotates and stores (one query, a contiguous cache).
template <int D, int G, class Kv, bool kRope>
void launch(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
            const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out, const NewKvRow& rope,
            float* lse) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), n_kv_heads = k_cache.dim(1);
  dispatch_kv_dtype(k_cache.dtype, [&](auto elem) {
    using E = decltype(elem);
    auto* kernel = decode_attention_kernel<D, G, Kv, E, kRope>;
    static const int resident = [kernel] {
      int blocks = 0;
      CORVID_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
      return blocks;
    }();
    const int splits = decode_split_count(ctx, n * n_heads / G, extent, resident);
    float* partial =
        splits > 1 ? static_cast<float*>(ctx.scratch(static_cast<size_t>(n * n_heads * splits * (D + 2)) * 4)) : nullptr;
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(n_heads / G), static_cast<unsigned>(splits));
    launch_pdl("decode_attention_kernel", kernel, grid, dim3(kThreads), ctx.stream, q.ptr<float>(),
               static_cast<const E*>(k_cache.data), static_cast<const E*>(v_cache.data), kv, pos, scale, window,
               partial, out.ptr<float>(), static_cast<int>(n_heads), static_cast<int>(n_kv_heads), splits, rope, lse);
    if (splits > 1) attention_combine(ctx, partial, out, splits, lse);
  });
}

template <int D, class Kv, bool kRope>
void launch_group(int group, Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                  const Kv& kv, const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                  const NewKvRow& rope, float* lse) {
  if (group % 8 == 0) launch<D, 8, Kv, kRope>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
  else if (group % 4 == 0) launch<D, 4, Kv, kRope>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
  else if (group % 2 == 0) launch<D, 2, Kv, kRope>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
  else launch<D, 1, Kv, kRope>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
}

// What the decode kernels take: head sizes 64, 128 and 256, and a 16-byte aligned cache
// (float4 key loads) of plain elements (the coded formats take attention.cu's kernels).
// The grid's y (head groups) is within range: the callers check heads <= 65535.
bool decode_kernels_take(const Tensor& q, const Tensor& k_cache) {
  const int64_t head_dim = q.dim(2);
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && aligned16(k_cache.data) &&
         kv_dtype_is_plain(k_cache.dtype);
}

// Runs decode attention where decode_kernels_take says so.
template <class Kv, bool kRope>
void launch_head_dim(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                     const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                     const NewKvRow& rope, float* lse) {
  const int g = static_cast<int>(q.dim(1) / k_cache.dim(1));
  switch (q.dim(2)) {
    case 64: launch_group<64, Kv, kRope>(g, ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
      return;
    case 128: launch_group<128, Kv, kRope>(g, ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
      return;
    case 256: launch_group<256, Kv, kRope>(g, ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, rope, lse);
      return;
    default: fail("CUDA decode attention: head_dim ", q.dim(2), " is not 64, 128 or 256");
  }
}

}  // namespace

// How many blocks share one head group's keys: as many as the GPU holds at once
// (resident_per_sm from the kernel's occupancy), so that every block is running and has
// requested its first tile before the step's earlier kernels finish; no more splits than
// the extent has tiles, at most kMaxSplits. CORVID_DECODE_BLOCKS_PER_SM overrides the
// blocks per SM (A/B runs).
int decode_split_count(const Context& ctx, int64_t blocks_per_split, int64_t extent, int resident_per_sm) {
  static const int forced = env_int("CORVID_DECODE_BLOCKS_PER_SM", 0);
  const int per_sm = forced > 0 ? forced : std::max(resident_per_sm, 1);
  const int64_t want = (per_sm * static_cast<int64_t>(ctx.sm_count) + blocks_per_split - 1) / blocks_per_split;
  const int64_t most = (extent + kKeysPerSplit - 1) / kKeysPerSplit;
  return static_cast<int>(std::clamp<int64_t>(std::min(want, most), 1, kMaxSplits));
}

template <class Kv>
bool attention_decode(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                      const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                      float* lse) {
  if (attention_decode_coded(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse)) return true;
  if (!decode_kernels_take(q, k_cache)) return false;
  launch_head_dim<Kv, false>(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, NewKvRow{}, lse);
  return true;
}

bool attention_decode_rope_supported(const Tensor& q, const Tensor& k_cache) {
  return q.dim(0) == 1 && decode_kernels_take(q, k_cache);
}

void attention_decode_rope(Context& ctx, const Tensor& q, const NewKvRow& row, const Tensor& k_cache,
                           const Tensor& v_cache, const int32_t* pos, float scale, int64_t window, const Tensor& out) {
  CORVID_CHECK(attention_decode_rope_supported(q, k_cache), "CUDA attention_decode_rope: q ", q.shape_str(),
               " (one query of head size 64, 128 or 256 over a 16-byte aligned cache)");
  launch_head_dim<ContiguousKv, true>(ctx, q, k_cache, v_cache, ContiguousKv{}, pos, k_cache.dim(0), scale, window,
                                      out, row, nullptr);
}

template bool attention_decode<ContiguousKv>(Context&, const Tensor&, const Tensor&, const Tensor&, const ContiguousKv&,
                                             const int32_t*, int64_t, float, int64_t, const Tensor&, float*);
template bool attention_decode<PagedKv>(Context&, const Tensor&, const Tensor&, const Tensor&, const PagedKv&,
                                        const int32_t*, int64_t, float, int64_t, const Tensor&, float*);

}  // namespace corvid::ops::cuda
