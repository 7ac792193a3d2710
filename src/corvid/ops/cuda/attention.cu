// Causal GQA attention over the KV cache on the GPU, the straightforward way:
// one block per (query, head), sixteen warps splitting the visible keys, each warp
// keeping an online softmax (running max, running sum, output accumulator in
// registers: lane l holds dims l, l+32, …); the warps' partial results merge
// through shared memory at the end. Scores in fp32. Decode-speed work (split-KV
// over many blocks) comes later. Prompts in Fast mode use attention_prefill.cu.
#include <cmath>

#include "corvid/ops/cuda/attention_prefill.cuh"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"

namespace corvid::ops::cuda {

namespace {

constexpr int kWarps = 16;  // decode has one block per head: the warps split the keys
constexpr int kMaxHeadDim = 256;
constexpr int64_t kPrefillMinQueries = 16;  // fewer queries (decode, short appends) stay on the fp32 kernel
constexpr int kPerLane = kMaxHeadDim / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int kDims>  // dims per lane: ceil(head_dim / 32)
__global__ void attention_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                                 const float* __restrict__ v_cache, const int32_t* __restrict__ positions,
                                 float scale, int64_t window, float* __restrict__ out, int n_heads, int n_kv_heads,
                                 int head_dim) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kDims * 32];
  const int t = blockIdx.x, h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kvh = h / (n_heads / n_kv_heads);
  const int64_t pos = positions[t];
  const int64_t first = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
  const int64_t kv_stride = static_cast<int64_t>(n_kv_heads) * head_dim;

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
    const float* kp = k_cache + j * kv_stride + static_cast<int64_t>(kvh) * head_dim;
    const float* vp = v_cache + j * kv_stride + static_cast<int64_t>(kvh) * head_dim;
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      if (d < head_dim) s += qr[e] * kp[d];
    }
    s = warp_sum(s) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int d = lane + 32 * e;
      acc[e] = acc[e] * correction + (d < head_dim ? p * vp[d] : 0.0f);
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
  // it gets weight 0. The query's own key is always visible, so `big` is finite.
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
}

}  // namespace

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out) {
  Context& ctx = context();
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2), n_kv_heads = k_cache.dim(1);
  CORVID_CHECK(head_dim <= kMaxHeadDim, "CUDA attention: head_dim ", head_dim, " exceeds ", kMaxHeadDim);
  CORVID_CHECK(n <= INT32_MAX && n_heads <= 65535, "CUDA attention: grid too large (", n, " queries x ", n_heads,
               " heads)");
  const int32_t* pos = ctx.upload(UploadSlot::Positions, positions);
  // Prompts take the tensor-core kernel unless the user asked for exact numerics.
  if (n >= kPrefillMinQueries && quantized_matmul() == QuantizedMatmul::Fast && attention_prefill_supported(q, k_cache)) {
    attention_prefill(q, k_cache, v_cache, pos, scale, window, out);
    return;
  }
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(n_heads));
  auto launch = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, ctx.stream>>>(q.ptr<float>(), k_cache.ptr<float>(), v_cache.ptr<float>(), pos,
                                                 scale, window, out.ptr<float>(), static_cast<int>(n_heads),
                                                 static_cast<int>(n_kv_heads), static_cast<int>(head_dim));
    CORVID_CUDA_LAUNCHED("attention_kernel");
  };
  // Registers per lane scale with head_dim: instantiate the common sizes.
  if (head_dim <= 32) launch(attention_kernel<1>);
  else if (head_dim <= 64) launch(attention_kernel<2>);
  else if (head_dim <= 128) launch(attention_kernel<4>);
  else launch(attention_kernel<kPerLane>);
}

}  // namespace corvid::ops::cuda
