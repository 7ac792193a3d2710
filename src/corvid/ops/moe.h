// Sparse mixture-of-experts ops: the router's top-k and the routed experts' SwiGLU /
// GeGLU MLPs over one stack of expert weights per projection. Backend-neutral like
// ops.h (checks in moe.cc, kernels in cpu/moe.cc and cuda/moe.cu).
#pragma once

#include <cstdint>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/ops/ops.h"

namespace corvid::ops {

// E matrices [rows, cols] in one allocation: expert e is rows
// [e * stride + offset, e * stride + offset + rows) of `data` ([E * stride, cols], any
// weight dtype). One layout serves every checkpoint: transformers 5's fused
// gate_up_proj [E, 2I, H] is gate = {stride 2I, offset 0} and up = {stride 2I, offset I};
// per-expert tensors stacked at load and GGUF's ffn_*_exps are stride = rows.
// On the CPU per-expert tensors that do not lie back to back in the file stay where
// they are (`parts`, one view each, no copy) and `data` is empty; the GPU kernels
// always take the stacked form.
struct ExpertStack {
  Tensor data;
  int64_t rows = 0, stride = 0, offset = 0;
  std::vector<Tensor> parts;

  bool stacked() const { return parts.empty(); }
  DType dtype() const { return stacked() ? data.dtype : parts[0].dtype; }
  int64_t cols() const { return stacked() ? data.cols() : parts[0].cols(); }
  // Expert e's matrix, as a 2-D view (rows are whole in every layout).
  Tensor expert(int64_t e) const {
    if (!stacked()) return parts[static_cast<size_t>(e)];
    return Tensor(data.dtype, {rows, data.cols()}, data.row(e * stride + offset), data.device);
  }
};

// The routed experts of one MoE layer: expert e's output is
// down_e(act(gate_e(x)) * up_e(x)); gate/up [I, H], down [H, I] per expert.
struct Experts {
  int64_t count = 0, ffn = 0;  // E, I
  ExpertStack gate, up, down;
  // Set only when the stacks live in pinned host memory (--moe-offload): a device
  // buffer of at least expert_staging_bytes(routed bytes). A GPU step whose (token,
  // slot) pairs are at least the experts in number touches most of them, and its grouped
  // GEMM reads each expert's rows once per tile of tokens, in small pieces that cross
  // the host link slowly; such a step first copies the layer's stacks here with the copy
  // engine (one transfer at the link's rate) and multiplies from the copy. Decode steps
  // read the routed experts in place. One buffer serves every offloaded layer: layers
  // run one after another on one stream.
  Tensor staging;
};

// Device bytes a layer's staging copy needs for `routed_bytes` of routed expert stacks
// (each of the at most three stacks starts 256-byte aligned).
inline int64_t expert_staging_bytes(int64_t routed_bytes) { return routed_bytes + 3 * 256; }

// Whether the MoE ops below run on `device` (the CPU and, in CUDA builds, the GPU).
bool moe_supported(Device device);

// The router's choice per token: p = softmax(logits[t, :]) in F32 over all E experts,
// the k = weights.cols() largest p in descending order (equal p: the lower expert index
// first), and with norm_topk their weights divided by their sum.
//   logits [n, E] F32 → weights [n, k] F32, ids [n, k] I32 (expert indices).
void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids);

// Buffers moe_experts works in (on the op's device): F32 rows for every (token, slot)
// pair, n * k of them, and the GPU's grouping of those pairs by expert.
struct MoeScratch {
  Tensor x;     // [n * k, H]: the tokens gathered by expert (CPU)
  Tensor act;   // [n * k, I]: act(gate) * up
  Tensor up;    // [n * k, I] (CPU)
  Tensor y;     // [n * k, H]: each pair's expert output
  Tensor plan;  // I32, moe_plan_size(n * k, E) values (CUDA; may be empty on the CPU)
};

// I32 values of MoeScratch::plan for `pairs` (token, slot) pairs over `experts`
// experts: the GPU's grouped GEMM puts each expert's pairs in tiles of 64 rows, so at
// most min(pairs, ceil(pairs / 64) + experts) tiles, each one expert id and 64 pair indices.
int64_t moe_plan_size(int64_t pairs, int64_t experts);

// out[t] = sum over slots j (in order) of weights[t, j] * expert_{ids[t, j]}(x[t]).
// x [n, H] F32, ids / weights [n, k] from moe_route, out [n, H] F32 (may alias x: x is
// read only before out is written).
// Tokens are grouped by expert and each expert multiplies the rows routed to it, so a
// token's result does not depend on which other tokens share its experts: on the CPU
// bit for bit, and on the GPU too for a given kind of step. The GPU runs steps of up to
// 8 tokens, and every step in Exact numerics, as GEMVs with F32 activations, one per
// (token, slot) pair reading its expert's rows; longer steps in Fast numerics sort the
// pairs by expert on the device and run a grouped GEMM on tensor cores with 16-bit
// operands (as ops::matmul's prompt GEMMs), which reduces each row alike wherever it
// lies. Expert ids outside [0, E) throw on the CPU and contribute nothing on the GPU
// (which cannot stop a recorded step).
void moe_experts(const Tensor& x, const Experts& experts, const Tensor& ids, const Tensor& weights,
                 GatedActivation act, const MoeScratch& scratch, const Tensor& out);

// out[r, :] = x[r, :] + sigmoid(gate[r]) * y[r, :]: a shared expert's output y gated
// into the routed experts' x (Qwen2-MoE, Qwen3-Next). x, y, out [n, H] F32 (out may
// alias x), gate [n, 1] F32.
void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out);

}  // namespace corvid::ops
