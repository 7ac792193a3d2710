// Causal GQA attention over the KV cache on the GPU. Decode (fewer than
// kPrefillMinQueries queries) uses split-KV blocks (below); Exact-mode prompts use
// one block per (query, head), sixteen warps splitting the visible keys, each warp
// keeping an online softmax (running max, running sum, output accumulator in
// registers: lane l holds dims l, l+32, …); the warps' partial results merge
// through shared memory at the end. Scores in fp32. Fast-mode prompts use the
// tensor-core kernel in attention_prefill.cu. The kernels here read every cache format
// (plain elements and the coded ones) through kv_codec.cuh's kv_head / kv_value.
#include <algorithm>
#include <cmath>
#include <vector>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/attention_decode.cuh"
#include "corvid/ops/cuda/attention_prefill.cuh"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/half_out.cuh"
#include "corvid/ops/cuda/int8_out.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/kv_codec.cuh"
#include "corvid/ops/cuda/kv_rows.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kWarps = 16;  // decode has one block per head: the warps split the keys
// Gemma 4's full layers have heads of 512: the tensor-core prefill takes them, the fused
// decode kernels (attention_decode.cu) at most 256, so wider heads' decode runs the fp32
// kernels below.
constexpr int kMaxHeadDim = 512;
constexpr int64_t kPrefillMinQueries = 16;  // fewer queries (decode, short appends) stay on the fp32 kernel
constexpr int kPerLane = kMaxHeadDim / 32;


// kDims: dims per lane, ceil(head_dim / 32); Kv: where key rows live (kv_rows.cuh);
// EK, EV: the caches' element types or formats (kv_elem.cuh, kv_codec.cuh).
template <int kDims, class Kv, class EK, class EV>
__global__ void attention_kernel(const float* __restrict__ q, const EK* __restrict__ k_cache,
                                 const EV* __restrict__ v_cache, Kv kv, const int32_t* __restrict__ positions,
                                 float scale, int64_t window, float* __restrict__ out, int n_heads, int n_kv_heads,
                                 int head_dim, float* __restrict__ lse) {
  pdl_launch_dependents();  // the next kernel (the GEMV's quantizer) may start launching
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kDims * 32];
  const int t = blockIdx.x, h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kvh = h / (n_heads / n_kv_heads);
  const int64_t pos = positions[t];
  const int64_t first = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;

  float qr[kDims], acc[kDims];
  const float* qp = q + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
#pragma unroll
  for (int e = 0; e < kDims; ++e) {
    const int d = lane + 32 * e;
    qr[e] = d < head_dim ? qp[d] : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = first + warp; j <= pos; j += kWarps) {
    const int64_t r = kv.row(t, j);
    const EK* kp = kv_head(k_cache, r, kvh, n_kv_heads, head_dim);
    const EV* vp = kv_head(v_cache, r, kvh, n_kv_heads, head_dim);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      if (d < head_dim) s += qr[e] * kv_value(kp, d);
    }
    s = warp_sum(s) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      acc[e] = acc[e] * correction + (d < head_dim ? p * kv_value(vp, d) : 0.0f);
    }
    m = m_new;
  }
  if (lane == 0) {
    part_m[warp] = m;
    part_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < kDims; ++e) part_acc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  // Merge the warps' partial softmaxes. A warp may have seen no key (short ranges):
  // it gets weight 0. The query's own key is always visible, so `big` is finite (unless
  // lse is asked for: a part of the delayed switch the query lies before, lse -inf).
  float big = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) big = fmaxf(big, part_m[w]);
  float total = 0.0f;
  float weight[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = part_m[w] == -INFINITY ? 0.0f : expf(part_m[w] - big);
    total += part_l[w] * weight[w];
  }
  float* op = out + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kWarps * 32) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += part_acc[w][d] * weight[w];
    op[d] = sum / total;
  }
  if (lse && threadIdx.x == 0) lse[static_cast<int64_t>(t) * n_heads + h] = big + logf(total);
}

// Decode (few queries) splits each head's keys over several blocks so that a long
// context keeps every SM busy (one block per head would use 32 of 132 SMs for an 8B
// model): each block runs the same per-warp online softmax over its share of the keys
// and writes (max, sum, unnormalised output) to a scratch row; a second kernel merges
// a head's splits. The split count depends only on the cache's capacity and the
// shapes, never on the position, so a recorded decode step replays at any length.
constexpr int kSplitWarps = 4;
constexpr int kKeysPerSplit = 256;  // a split is worth a block from this many cache rows on

// G query heads that share a kv head run in one block, so each key and value row is
// read once per group instead of once per head.
template <int kDims, int G, class Kv, class EK, class EV>
__global__ void attention_split_kernel(const float* __restrict__ q, const EK* __restrict__ k_cache,
                                       const EV* __restrict__ v_cache, Kv kv, const int32_t* __restrict__ positions,
                                       float scale, int64_t window, float* __restrict__ partial, int n_heads,
                                       int n_kv_heads, int head_dim, int splits) {
  __shared__ float part_m[kSplitWarps][G], part_l[kSplitWarps][G];
  __shared__ float part_acc[kSplitWarps][G][kDims * 32];
  const int t = blockIdx.x, h0 = blockIdx.y * G, split = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kvh = h0 / (n_heads / n_kv_heads);
  const int64_t pos = positions[t];
  const int64_t first = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
  const int64_t chunk = (pos - first + splits) / splits;  // ceil(len / splits), len = pos - first + 1
  const int64_t start = first + split * chunk, end = min(pos, start + chunk - 1);

  float qr[G][kDims], acc[G][kDims], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qp = q + (static_cast<int64_t>(t) * n_heads + h0 + g) * head_dim;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      qr[g][e] = d < head_dim ? qp[d] : 0.0f;
      acc[g][e] = 0.0f;
    }
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  for (int64_t j = start + warp; j <= end; j += kSplitWarps) {
    const int64_t r = kv.row(t, j);
    const EK* kp = kv_head(k_cache, r, kvh, n_kv_heads, head_dim);
    const EV* vp = kv_head(v_cache, r, kvh, n_kv_heads, head_dim);
    float kr[kDims], vr[kDims];
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      kr[e] = d < head_dim ? kv_value(kp, d) : 0.0f;
      vr[e] = d < head_dim ? kv_value(vp, d) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < kDims; ++e) s += qr[g][e] * kr[e];
      s = warp_sum(s) * scale;
      const float m_new = fmaxf(m[g], s);
      const float correction = expf(m[g] - m_new);
      const float p = expf(s - m_new);
      l[g] = l[g] * correction + p;
#pragma unroll
      for (int e = 0; e < kDims; ++e) acc[g][e] = acc[g][e] * correction + p * vr[e];
      m[g] = m_new;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      part_m[warp][g] = m[g];
      part_l[warp][g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < kDims; ++e) part_acc[warp][g][lane + 32 * e] = acc[g][e];
  }
  __syncthreads();
  // Each head's (max, sum, output) over this split: an empty split (short context) has max -inf.
  for (int g = 0; g < G; ++g) {
    float big = -INFINITY;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) big = fmaxf(big, part_m[w][g]);
    float weight[kSplitWarps], total = 0.0f;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) {
      weight[w] = part_m[w][g] == -INFINITY ? 0.0f : expf(part_m[w][g] - big);
      total += part_l[w][g] * weight[w];
    }
    float* row = partial + ((static_cast<int64_t>(t) * n_heads + h0 + g) * splits + split) * (head_dim + 2);
    if (threadIdx.x == 0) {
      row[0] = big;
      row[1] = total;
    }
    for (int d = threadIdx.x; d < head_dim; d += kSplitWarps * 32) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kSplitWarps; ++w) sum += part_acc[w][g][d] * weight[w];
      row[2 + d] = sum;
    }
  }
}

// One block per (query, head, 32 dims): the splits' weights exp(m_s - max) go to shared
// memory, and warp w adds up splits w, w + 8, ... for the block's 32 dims (lane = dim:
// one coalesced 128-byte read per split, all of a warp's reads issued first), and the
// warps' sums meet in shared memory. Blocks per dim chunk spread the partials' bytes
// (up to 2 MB at 128 splits) over more SMs than one block per head would.
constexpr int kMaxCombineSplits = 128;
constexpr int kCombineWarps = 8;
constexpr int kCombineDims = 32;
// q8.q set: out also as int8 activations (head_dim % 32 == 0: the block's 32 dims are
// one activation block).
__global__ void __launch_bounds__(kCombineWarps * 32) attention_combine_kernel(const float* __restrict__ partial,
                                                                               float* __restrict__ out, int n_heads,
                                                                               int head_dim, int splits, Int8Out q8,
                                                                               float* __restrict__ lse) {
  pdl_launch_dependents();  // the next kernel may start launching (launch_pdl)
  pdl_wait();               // launched with launch_pdl: the splits' rows first
  __shared__ float weight_s[kMaxCombineSplits];
  __shared__ float acc_s[kCombineWarps][kCombineDims];
  __shared__ float inv_total;
  const int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int d = blockIdx.z * kCombineDims + lane;
  const int64_t stride = head_dim + 2;
  const float* rows = partial + (static_cast<int64_t>(t) * n_heads + h) * splits * stride;
  // This warp's splits' values of dim d, all requested at once, before (and while) warp 0
  // turns the splits' maxima into weights: one round trip to L2 instead of one for the
  // maxima and then several for the values.
  constexpr int kPerWarp = kMaxCombineSplits / kCombineWarps;
  float part[kPerWarp];
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int s = warp + i * kCombineWarps;
    part[i] = s < splits && d < head_dim ? rows[s * stride + 2 + d] : 0.0f;
  }
  if (warp == 0) {
    float big = -INFINITY;
    for (int s = lane; s < splits; s += 32) big = fmaxf(big, rows[s * stride]);
    big = warp_max(big);
    float total = 0.0f;
    for (int s = lane; s < splits; s += 32) {
      // An empty split (no keys in its range) has max -inf and weighs nothing.
      const float m = rows[s * stride];
      const float w = m == -INFINITY ? 0.0f : expf(m - big);
      weight_s[s] = w;
      total += rows[s * stride + 1] * w;
    }
    total = warp_sum(total);
    if (lane == 0) inv_total = 1.0f / total;
    // -inf: no split saw a key (the query lies before this part of the delayed switch).
    if (lse && lane == 0 && blockIdx.z == 0) lse[static_cast<int64_t>(t) * n_heads + h] = big + logf(total);
  }
  __syncthreads();
  float acc = 0.0f;  // splits in ascending order, as the values' loads went
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int s = warp + i * kCombineWarps;
    if (s < splits) acc = fmaf(part[i], weight_s[s], acc);
  }
  acc_s[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && d < head_dim) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) sum += acc_s[w][lane];
    const int64_t i = (static_cast<int64_t>(t) * n_heads + h) * head_dim + d;
    out[i] = sum * inv_total;
    if (q8.q != nullptr) store_int8(q8, i, sum * inv_total, true);
  }
}

// How many blocks share one head's keys: enough blocks for two per SM, no more
// splits than the cache has kKeysPerSplit-row stretches, at most 64.
int decode_splits(const Context& ctx, int64_t blocks_per_split, int64_t capacity) {
  const int64_t want = (2 * static_cast<int64_t>(ctx.sm_count) + blocks_per_split - 1) / blocks_per_split;
  const int64_t most = (capacity + kKeysPerSplit - 1) / kKeysPerSplit;
  return static_cast<int>(std::clamp<int64_t>(std::min(want, most), 1, 64));
}

// fp32_attention's kernels for the caches' element types EK and EV.
template <class Kv, class EK, class EV>
void fp32_attention_kernels(Context& ctx, const Tensor& q, const EK* k_cache, const EV* v_cache, int64_t n_kv_heads,
                            int heads_per_block, const Kv& kv, const int32_t* pos, int64_t extent, float scale,
                            int64_t window, const Tensor& out, float* lse) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2);
  const int splits = n < kPrefillMinQueries ? decode_splits(ctx, n * n_heads / heads_per_block, extent) : 1;
  // A short cache gives one split: the one-block-per-head kernel below has more warps then.
  if (splits > 1) {
    float* partial = static_cast<float*>(ctx.scratch(static_cast<size_t>(n * n_heads * splits * (head_dim + 2)) * 4));
    const dim3 split_grid(static_cast<unsigned>(n), static_cast<unsigned>(n_heads / heads_per_block),
                          static_cast<unsigned>(splits));
    auto launch_split = [&](auto kernel) {
      kernel<<<split_grid, kSplitWarps * 32, 0, ctx.stream>>>(q.ptr<float>(), k_cache, v_cache,
                                                              kv, pos, scale, window, partial, static_cast<int>(n_heads),
                                                              static_cast<int>(n_kv_heads), static_cast<int>(head_dim),
                                                              splits);
      CORVID_CUDA_LAUNCHED("attention_split_kernel");
    };
    auto for_dims = [&](auto dims) {
      constexpr int D = decltype(dims)::value;
      if constexpr (D > 8) {  // fp32_attention gives wide heads at most 4 a block
        if (heads_per_block == 4) launch_split(attention_split_kernel<D, 4, Kv, EK, EV>);
        else if (heads_per_block == 2) launch_split(attention_split_kernel<D, 2, Kv, EK, EV>);
        else launch_split(attention_split_kernel<D, 1, Kv, EK, EV>);
      } else if (heads_per_block == 8) launch_split(attention_split_kernel<D, 8, Kv, EK, EV>);
      else if (heads_per_block == 4) launch_split(attention_split_kernel<D, 4, Kv, EK, EV>);
      else if (heads_per_block == 2) launch_split(attention_split_kernel<D, 2, Kv, EK, EV>);
      else launch_split(attention_split_kernel<D, 1, Kv, EK, EV>);
    };
    if (head_dim <= 32) for_dims(std::integral_constant<int, 1>{});
    else if (head_dim <= 64) for_dims(std::integral_constant<int, 2>{});
    else if (head_dim <= 128) for_dims(std::integral_constant<int, 4>{});
    else if (head_dim <= 256) for_dims(std::integral_constant<int, 8>{});
    else for_dims(std::integral_constant<int, kPerLane>{});
    attention_combine(ctx, partial, out, splits, lse);
    return;
  }
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(n_heads));
  auto launch = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, ctx.stream>>>(q.ptr<float>(), k_cache, v_cache, kv, pos,
                                                 scale, window, out.ptr<float>(), static_cast<int>(n_heads),
                                                 static_cast<int>(n_kv_heads), static_cast<int>(head_dim), lse);
    CORVID_CUDA_LAUNCHED("attention_kernel");
  };
  // Registers per lane scale with head_dim: instantiate the common sizes.
  if (head_dim <= 32) launch(attention_kernel<1, Kv, EK, EV>);
  else if (head_dim <= 64) launch(attention_kernel<2, Kv, EK, EV>);
  else if (head_dim <= 128) launch(attention_kernel<4, Kv, EK, EV>);
  else if (head_dim <= 256) launch(attention_kernel<8, Kv, EK, EV>);
  else launch(attention_kernel<kPerLane, Kv, EK, EV>);
}

// The fp32 kernels over n queries (q, out: [n, heads, head_dim]) whose keys `kv` places
// in k_cache/v_cache. extent: how many rows a query could see at most (the cache's
// capacity, or a block table's span) — it sets the split count, so that a recorded
// decode step replays at any position.
template <class Kv>
void fp32_attention(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                    const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                    float* lse) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2), n_kv_heads = k_cache.dim(1);
  // Heads per block: the largest of 8, 4, 2, 1 that divides the GQA group; heads wider
  // than 256 at most 4 (8 would need 64 KiB of static shared memory).
  const int64_t group = n_heads / n_kv_heads;
  const int widest = head_dim > 256 ? 4 : 8;
  int heads_per_block = 1;
  while (heads_per_block * 2 <= widest && group % (heads_per_block * 2) == 0) heads_per_block *= 2;
  if (n < kPrefillMinQueries && attention_decode(ctx, q, k_cache, v_cache, kv, pos, extent, scale, window, out, lse))
    return;
  dispatch_kv_pair(k_cache.dtype, v_cache.dtype, [&](auto key, auto value) {
    using EK = decltype(key);
    using EV = decltype(value);
    fp32_attention_kernels(ctx, q, static_cast<const EK*>(k_cache.data), static_cast<const EV*>(v_cache.data),
                           n_kv_heads, heads_per_block, kv, pos, extent, scale, window, out, lse);
  });
}

bool use_prefill_kernel(const Tensor& q, const Tensor& k_cache, const Tensor& out, int64_t queries) {
  return queries >= kPrefillMinQueries && quantized_matmul() == QuantizedMatmul::Fast &&
         attention_prefill_supported(q, k_cache, out);
}

// Rows [begin, end) of a [n, heads, head_dim] tensor.
Tensor query_rows(const Tensor& t, int64_t begin, int64_t end) {
  return Tensor(DType::F32, {end - begin, t.dim(1), t.dim(2)}, t.ptr<float>() + begin * t.dim(1) * t.dim(2), t.device);
}

void check_grid(const Tensor& q) {
  CORVID_CHECK(q.dim(2) <= kMaxHeadDim, "CUDA attention: head_dim ", q.dim(2), " exceeds ", kMaxHeadDim);
  CORVID_CHECK(q.dim(0) <= INT32_MAX && q.dim(1) <= 65535, "CUDA attention: grid too large (", q.dim(0),
               " queries x ", q.dim(1), " heads)");
}

}  // namespace

int64_t max_attention_head_dim() { return kMaxHeadDim; }

void attention_combine(Context& ctx, const float* partial, const Tensor& out, int splits, float* lse) {
  CORVID_CHECK(splits <= kMaxCombineSplits, "CUDA attention: ", splits, " splits exceed ", kMaxCombineSplits);
  const int64_t n = out.dim(0), n_heads = out.dim(1), head_dim = out.dim(2);
  // A decode GEMV (the output projection) reads out next: write it as int8 activations
  // too (context.h Int8Rows).
  // (A block's 32 dims must be one activation block: head_dim % 32 == 0.)
  // (Not with lse: the delayed switch merges out with another part first.)
  Int8Out q8;
  if (head_dim % 32 == 0 && !lse) {
    const Context::Int8Rows& made = ctx.int8_output(out.data, n, n_heads * head_dim);
    q8 = {made.q, made.d};
  }
  launch_pdl("attention_combine_kernel", attention_combine_kernel,
             dim3(static_cast<unsigned>(n), static_cast<unsigned>(n_heads),
                  static_cast<unsigned>((head_dim + kCombineDims - 1) / kCombineDims)),
             dim3(kCombineWarps * 32), ctx.stream,
             partial, out.ptr<float>(), static_cast<int>(n_heads), static_cast<int>(head_dim), splits, q8, lse);
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Indices& positions,
               float scale, int64_t window, const Tensor& out, const Tensor* lse) {
  Context& ctx = context();
  check_grid(q);
  const int32_t* pos = ctx.indices(UploadSlot::Positions, positions);
  float* lse_p = lse ? lse->ptr<float>() : nullptr;
  // Prompts take the tensor-core kernel unless the user asked for exact numerics.
  if (use_prefill_kernel(q, k_cache, out, q.dim(0))) {
    // The output projection reads out next (unless a part's lse is merged first): write
    // its 16-bit operand too.
    attention_prefill(q, k_cache, v_cache, pos, scale, window, out,
                      lse ? HalfOut{} : half_output(out.data, out.dim(0), out.dim(1) * out.dim(2)), lse_p);
    return;
  }
  fp32_attention(ctx, q, k_cache, v_cache, ContiguousKv{}, pos, k_cache.dim(0), scale, window, out, lse_p);
}

bool rope_store_kv_attention_fuses(const Tensor& q, const Tensor& k_cache) {
  static const bool off = env_flag("CORVID_NO_FUSED_ROPE");
  return !off && attention_decode_rope_supported(q, k_cache);
}

void rope_store_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                             const RopeParams& params, const Tensor& k_cache, const Tensor& v_cache, float scale,
                             int64_t window, const Tensor& out) {
  Context& ctx = context();
  check_grid(q);
  const int32_t* pos = ctx.indices(UploadSlot::Positions, positions);
  const NewKvRow row{k.ptr<float>(),         v.ptr<float>(),     ctx.constant(params.inv_freq),
                     params.attention_factor, params.rotary_dim / 2, params.interleaved,
                     k_cache.data,            v_cache.data};
  attention_decode_rope(ctx, q, row, k_cache, v_cache, pos, scale, window, out);
}

// A batch mixes decode tokens (one query per sequence) with prefill chunks (many
// queries of one sequence, consecutive). Chunks long enough for the tensor-core
// kernel run it over their own block table; every other run of queries takes the
// fp32 kernels with per-query tables.
void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     const Indices& positions, float scale, int64_t window, const Tensor& out, const Tensor* lse) {
  Context& ctx = context();
  check_grid(q);
  CORVID_CHECK(paged.max_blocks <= INT32_MAX && paged.block_size <= INT32_MAX, "CUDA paged_attention: block table of ",
               paged.max_blocks, " blocks of ", paged.block_size, " is too large");
  const int32_t* pos = ctx.indices(UploadSlot::Positions, positions);
  const int32_t* tables = ctx.indices(UploadSlot::BlockTables, paged.block_tables);
  const int32_t* query_seq = ctx.indices(UploadSlot::QuerySeq, paged.query_seq);
  const int bs = static_cast<int>(paged.block_size), max_blocks = static_cast<int>(paged.max_blocks);
  const int64_t extent = paged.max_blocks * paged.block_size, n = q.dim(0);
  // Runs [begin, end) of consecutive queries of one sequence, and whether the run is long
  // enough for the tensor-core kernel.
  struct Run {
    int64_t begin, end;
    bool prefill;
  };
  std::vector<Run> runs;
  for (int64_t begin = 0; begin < n;) {
    int64_t end = begin + 1;
    while (end < n && paged.query_seq[static_cast<size_t>(end)] == paged.query_seq[static_cast<size_t>(begin)]) ++end;
    runs.push_back({begin, end, use_prefill_kernel(q, k_pool, out, end - begin)});
    begin = end;
  }
  // When every run takes the tensor-core kernel, they also write the output projection's
  // 16-bit operand (the fp32 kernels do not, so a batch with decode rows makes none).
  const bool all_prefill = std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.prefill; });
  const int64_t row_elems = q.dim(1) * q.dim(2);
  const HalfOut out16 = all_prefill && !lse ? half_output(out.data, n, row_elems) : HalfOut{};
  // A run's rows of lse (queries begin.. of [n, heads]).
  auto lse_rows = [&](int64_t begin) { return lse ? lse->ptr<float>() + begin * q.dim(1) : nullptr; };
  int64_t pending = 0;  // first query not yet handed to a kernel
  auto flush_fp32 = [&](int64_t end) {
    if (end <= pending) return;
    const PagedKv kv{tables, query_seq + pending, max_blocks, bs};
    fp32_attention(ctx, query_rows(q, pending, end), k_pool, v_pool, kv, pos + pending, extent, scale, window,
                   query_rows(out, pending, end), lse_rows(pending));
  };
  for (const auto& [begin, end, prefill] : runs) {
    if (!prefill) continue;
    flush_fp32(begin);
    const int32_t* table = tables + static_cast<int64_t>(paged.query_seq[static_cast<size_t>(begin)]) * max_blocks;
    const HalfOut run16 = out16.p ? HalfOut{out16.p + begin * row_elems, out16.f16} : HalfOut{};
    attention_prefill_sequence(query_rows(q, begin, end), k_pool, v_pool, table, bs, pos + begin, scale, window,
                               query_rows(out, begin, end), run16, lse_rows(begin));
    pending = end;
  }
  flush_fp32(n);
}

namespace {

// One warp per (query, head) row: the two parts' weights from their log-sum-exps, then
// the row's dims; a part whose lse is -inf (it saw no key) is dropped, not weighted (its
// row is undefined).
__global__ void merge_attention_kernel(float* __restrict__ out, const float* __restrict__ lse,
                                       const float* __restrict__ other, const float* __restrict__ other_lse,
                                       int64_t rows, int head_dim) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const float a = lse[r], b = other_lse[r];
  if (b == -INFINITY) return;
  float* x = out + r * head_dim;
  const float* y = other + r * head_dim;
  if (a == -INFINITY) {
    for (int d = lane; d < head_dim; d += 32) x[d] = y[d];
    return;
  }
  const float m = fmaxf(a, b), wa = expf(a - m), wb = expf(b - m), inv = 1.0f / (wa + wb);
  for (int d = lane; d < head_dim; d += 32) x[d] = (wa * x[d] + wb * y[d]) * inv;
}

}  // namespace

void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse) {
  Context& ctx = context();
  const int64_t rows = out.dim(0) * out.dim(1);
  constexpr int kRowsPerBlock = 8;
  merge_attention_kernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kRowsPerBlock * 32, 0,
                           ctx.stream>>>(out.ptr<float>(), lse.ptr<float>(), other.ptr<float>(), other_lse.ptr<float>(),
                                         rows, static_cast<int>(out.dim(2)));
  CORVID_CUDA_LAUNCHED("merge_attention_kernel");
}

}  // namespace corvid::ops::cuda
