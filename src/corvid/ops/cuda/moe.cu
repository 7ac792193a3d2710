// The MoE ops on the GPU (contracts in ops/moe.h): the router's softmax and top-k, the
// grouping of (token, slot) pairs by expert for the grouped GEMM, the weighted sum of
// each token's slots, and the shared expert's sigmoid gate. Everything stays on the
// device (the expert ids are never read back), so a recorded decode step holds the
// whole layer; the experts' products are in moe_experts.cu.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <optional>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/moe_experts.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kRouteWarps = 4, kMaxExperts = 1024, kMaxTopK = 64;

// One warp per token, as cpu::moe_route computes it: max, exp(l - max) in F32 summed in
// double, times the F32 reciprocal; then k rounds of a warp-wide argmax (greater
// probability, then lower index), each taking its winner out. Lane l owns experts
// l, l + 32, ..., so it alone reads and writes them and no round needs a barrier.
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_kernel(const float* __restrict__ logits, int64_t n, int experts, int k, bool norm,
                     float* __restrict__ weights, int32_t* __restrict__ ids) {
  __shared__ float probs[kRouteWarps][kMaxExperts];
  __shared__ float chosen_w[kRouteWarps][kMaxTopK];
  __shared__ int chosen_id[kRouteWarps][kMaxTopK];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= n) return;
  pdl_launch_dependents();
  pdl_wait();
  float* p = probs[warp];
  const float* l = logits + t * experts;

  float mx = -INFINITY;
  for (int e = lane; e < experts; e += 32) mx = fmaxf(mx, p[e] = l[e]);
  mx = warp_max(mx);
  if (mx == -INFINITY) mx = 0.0f;
  double sum = 0.0;
  for (int e = lane; e < experts; e += 32) sum += (p[e] = expf(p[e] - mx));
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int e = lane; e < experts; e += 32) p[e] *= inv;

  for (int j = 0; j < k; ++j) {
    // Probabilities are >= 0 and taken ones are -1: a strict > never picks one again.
    float bv = -1.0f;
    int bi = INT_MAX;
    for (int e = lane; e < experts; e += 32)
      if (p[e] > bv) bv = p[e], bi = e;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (bi % 32 == lane) p[bi] = -1.0f;
    if (lane == 0) chosen_w[warp][j] = bv, chosen_id[warp][j] = bi;
  }
  __syncwarp();
  float chosen = 0.0f;
  for (int j = 0; j < k; ++j) chosen += chosen_w[warp][j];
  for (int j = lane; j < k; j += 32) {
    weights[t * k + j] = norm ? chosen_w[warp][j] / chosen : chosen_w[warp][j];
    ids[t * k + j] = chosen_id[warp][j];
  }
}

// The grouped GEMM's plan (one block): pairs counted per expert, each expert given
// ceil(count / 64) tiles in expert order, tile_expert[t] set for every tile (-1 past
// the last), and each pair placed in its expert's rows (-1: padding). Within an expert
// the pairs' order depends on the atomics' order, which the GEMM's rows do not see.
constexpr int kPlanThreads = 1024;

__global__ void __launch_bounds__(kPlanThreads)
    moe_plan_kernel(const int32_t* __restrict__ ids, int pairs, int experts, int max_tiles,
                    int32_t* __restrict__ tile_expert, int32_t* __restrict__ rows) {
  __shared__ int count[kMaxExperts];
  __shared__ int first_tile[kMaxExperts];
  __shared__ int used_tiles;
  const int tid = static_cast<int>(threadIdx.x);
  pdl_launch_dependents();
  pdl_wait();
  for (int e = tid; e < experts; e += kPlanThreads) count[e] = 0;
  __syncthreads();
  for (int p = tid; p < pairs; p += kPlanThreads) {
    const int e = ids[p];
    if (e >= 0 && e < experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int t = 0;
    for (int e = 0; e < experts; ++e) {
      first_tile[e] = t;
      t += (count[e] + kExpertTileRows - 1) / kExpertTileRows;
    }
    used_tiles = t;
  }
  __syncthreads();
  for (int e = tid; e < experts; e += kPlanThreads) {
    const int tiles = (count[e] + kExpertTileRows - 1) / kExpertTileRows;
    for (int i = 0; i < tiles; ++i) tile_expert[first_tile[e] + i] = e;
    count[e] = 0;  // now each expert's next free row
  }
  for (int t = used_tiles + tid; t < max_tiles; t += kPlanThreads) tile_expert[t] = -1;
  for (int r = tid; r < max_tiles * kExpertTileRows; r += kPlanThreads) rows[r] = -1;
  __syncthreads();
  for (int p = tid; p < pairs; p += kPlanThreads) {
    const int e = ids[p];
    if (e < 0 || e >= experts) continue;
    rows[first_tile[e] * kExpertTileRows + atomicAdd(&count[e], 1)] = p;
  }
}

// out[t, c] = sum over slots j in order of weights[t, j] * y[t * k + j, c] (slots with
// an expert id out of range left out).
__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ weights,
                                   const int32_t* __restrict__ ids, int k, int experts, int64_t H,
                                   float* __restrict__ out) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= H) return;
  pdl_launch_dependents();
  pdl_wait();
  const int64_t t = blockIdx.x;
  float s = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int64_t p = t * k + j;
    const int e = ids[p];
    if (e >= 0 && e < experts) s += weights[p] * y[p * H + c];
  }
  out[t * H + c] = s;
}

// out may alias x.
__global__ void sigmoid_gate_add_kernel(const float* x, const float* __restrict__ gate, const float* __restrict__ y,
                                        float* out, int64_t H, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  pdl_launch_dependents();
  pdl_wait();
  const float g = 1.0f / (1.0f + expf(-gate[i / H]));
  out[i] = x[i] + g * y[i];
}

ExpertWeights weights_of(const ExpertStack& s) {
  const size_t row_bytes = s.data.row_bytes();
  return {s.data.ptr<uint8_t>() + static_cast<size_t>(s.offset) * row_bytes, static_cast<size_t>(s.stride) * row_bytes,
          row_bytes};
}

// The experts with their stacks copied into ex.staging (one copy-engine transfer per
// distinct stack on `stream`; gate and up may share one). Stream order makes the
// kernels that follow read the copy, and a later layer's copy wait for this layer's
// GEMMs.
Experts staged(const Experts& ex, cudaStream_t stream) {
  Experts out = ex;
  char* at = static_cast<char*>(ex.staging.data);
  auto copy = [&](ExpertStack& s, const ExpertStack& from) {
    s.data.data = at;
    s.data.device = ex.staging.device;
    CORVID_CUDA_CHECK(cudaMemcpyAsync(at, from.data.data, from.data.nbytes(), cudaMemcpyDefault, stream));
    at += (from.data.nbytes() + 255) / 256 * 256;
  };
  copy(out.gate, ex.gate);
  if (ex.up.data.data == ex.gate.data.data) {
    out.up.data.data = out.gate.data.data;
    out.up.data.device = out.gate.data.device;
  } else {
    copy(out.up, ex.up);
  }
  copy(out.down, ex.down);
  out.staging = Tensor();
  return out;
}

}  // namespace

void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids) {
  Context& ctx = context();
  launch_pdl("moe_route_kernel", moe_route_kernel, blocks_for(logits.rows(), kRouteWarps), kRouteWarps * 32,
             ctx.stream, logits.ptr<float>(), logits.rows(), static_cast<int>(logits.cols()),
             static_cast<int>(weights.cols()), norm_topk, weights.ptr<float>(), ids.ptr<int32_t>());
}

void moe_experts(const Tensor& x, const Experts& resident, const Tensor& ids, const Tensor& weights,
                 GatedActivation act, const MoeScratch& s, const Tensor& out) {
  Context& ctx = context();
  const int64_t n = x.rows(), H = x.cols(), k = ids.cols(), I = resident.ffn, pairs = n * k;
  CORVID_CHECK(pairs <= INT32_MAX / kExpertTileRows, "CUDA moe_experts: too many (token, slot) pairs");
  const auto experts = static_cast<int>(resident.count);
  // Tensor cores for prompt-sized steps in Fast numerics; the GEMVs (F32 throughout)
  // for decode steps and for Exact numerics.
  const bool grouped = quantized_matmul() == QuantizedMatmul::Fast && n > kGemvMaxCols && H % 32 == 0 &&
                       I % 32 == 0 && aligned16(x.data);
  std::optional<OpTimer> part;
  // Offloaded experts: a grouped step over at least as many pairs as experts multiplies
  // from a device copy (Experts::staging).
  const bool stage = grouped && resident.staging.data && pairs >= resident.count;
  if (stage) part.emplace("moe_experts.stage");
  const Experts ex = stage ? staged(resident, ctx.stream) : resident;
  ExpertMatmul gate_up;
  gate_up.dtype = ex.gate.dtype();
  gate_up.w0 = weights_of(ex.gate);
  gate_up.w1 = weights_of(ex.up);
  gate_up.m = I, gate_up.k = H;
  gate_up.glu = act == GatedActivation::Silu ? GemvGlu::Silu : GemvGlu::GeluTanh;
  gate_up.a = x.ptr<float>(), gate_up.lda = H, gate_up.a_div = static_cast<int>(k);
  gate_up.out = s.act.ptr<float>();
  gate_up.experts = experts;
  ExpertMatmul down;
  down.dtype = ex.down.dtype();
  down.w0 = down.w1 = weights_of(ex.down);
  down.m = H, down.k = I;
  down.a = s.act.ptr<float>(), down.lda = I, down.a_div = 1;
  down.out = s.y.ptr<float>();
  down.experts = experts;

  const int32_t* id = ids.ptr<int32_t>();
  if (grouped) {
    const int64_t max_tiles = moe_plan_size(pairs, ex.count) / (kExpertTileRows + 1);
    int32_t* tile_expert = s.plan.ptr<int32_t>();
    int32_t* rows = tile_expert + max_tiles;
    part.emplace("moe_experts.plan");
    launch_pdl("moe_plan_kernel", moe_plan_kernel, 1, kPlanThreads, ctx.stream, id, static_cast<int>(pairs), experts,
               static_cast<int>(max_tiles), tile_expert, rows);
    part.emplace("moe_experts.gate_up");
    expert_gemm(gate_up, tile_expert, rows, max_tiles, ctx.stream);
    part.emplace("moe_experts.down");
    expert_gemm(down, tile_expert, rows, max_tiles, ctx.stream);
    part.emplace("moe_experts.combine");
    launch_pdl("moe_combine_kernel", moe_combine_kernel, dim3(static_cast<unsigned>(n), blocks_for(H, 256)), 256,
               ctx.stream, s.y.ptr<float>(), weights.ptr<float>(), id, static_cast<int>(k), experts, H,
               out.ptr<float>());
  } else if (quantized_matmul() == QuantizedMatmul::Fast && dp4a_enabled() &&
             expert_int8_supports(gate_up, static_cast<int>(k)) && expert_int8_supports(down, static_cast<int>(k))) {
    // int8 activations in Context::scratch: x per token, then act per pair over it (act's
    // quantizer waits for the gate/up GEMV that reads x's int8 to finish). Grown once for
    // both first, so the second request cannot move the buffer the first handed out.
    ctx.scratch(std::max(int8_activation_bytes(n * H), int8_activation_bytes(pairs * I)));
    part.emplace("moe_experts.gate_up");
    expert_gate_up_int8(gate_up, id, pairs, quantize_activations(x.ptr<float>(), n, H, ctx.stream), ctx.stream);
    part.emplace("moe_experts.down");
    down.out = out.ptr<float>();
    expert_down_sum_int8(down, id, weights.ptr<float>(), n, static_cast<int>(k),
                         quantize_activations(s.act.ptr<float>(), pairs, I, ctx.stream), ctx.stream);
  } else {
    const bool exact = quantized_matmul() == QuantizedMatmul::Exact;
    part.emplace("moe_experts.gate_up");
    expert_gemv(gate_up, id, pairs, exact, ctx.stream);
    part.emplace("moe_experts.down");
    down.out = out.ptr<float>();
    expert_down_sum(down, id, weights.ptr<float>(), n, static_cast<int>(k), exact, ctx.stream);
  }
}

void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out) {
  Context& ctx = context();
  const int64_t count = x.numel();
  launch_pdl("sigmoid_gate_add_kernel", sigmoid_gate_add_kernel, blocks_for(count, 256), 256, ctx.stream,
             x.ptr<float>(), gate.ptr<float>(), y.ptr<float>(), out.ptr<float>(), x.cols(), count);
}

}  // namespace corvid::ops::cuda
