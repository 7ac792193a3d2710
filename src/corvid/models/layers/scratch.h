// Scratch: the activation buffers of one step, shared by a model's layers, on the
// model's device and grown to the largest step seen. A recorded step holds their
// addresses, so every growth bumps `generation` (Model::buffers_generation).
#pragma once

#include <algorithm>
#include <cstdint>

#include "corvid/core/device.h"
#include "corvid/ops/moe.h"

namespace corvid::layers {

struct ScratchDims {
  int64_t hidden = 0, q = 0, kv = 0, ffn = 0;  // widest q / kv projection and MLP over all layers
  int64_t experts = 0, top_k = 0, expert_ffn = 0;  // MoE layers (0: none)
};

struct Scratch {
  Device device = Device::CPU;
  ScratchDims dims;
  int64_t tokens = 0;
  uint64_t generation = 0;
  DeviceTensor x, h, q, k, v, attn, gate, up;  // [tokens, width] F32
  DeviceTensor fused;  // [1, q|k|v or gate|up]: a single token's fused GEMV output
  // MoE layers: router logits [tokens, E], the routing [tokens, k] (weights F32, expert
  // ids I32), the (token, slot) rows [tokens * k, H or I], the routed sum and the
  // shared expert's output and gate.
  DeviceTensor router, route_weights, route_ids, expert_x, expert_act, expert_up, expert_y, routed, shared, shared_gate;
  DeviceTensor expert_plan;  // I32: the GPU's grouping of the pairs (ops::moe_plan_size)
  // The delayed switch (kv/kv_store.h KvSegment): the coded part's attention output
  // [tokens, q] and both parts' log-sum-exps [tokens, heads]; made on first use (a store
  // without the switch never needs them), grown with `tokens`.
  DeviceTensor attn_tail, lse_head, lse_tail;
  int64_t split_tokens = 0, split_heads = 0;

  void ensure_split(int64_t heads) {
    if (split_tokens >= tokens && split_heads >= heads) return;
    ++generation;
    split_tokens = tokens;
    split_heads = std::max(split_heads, heads);
    attn_tail = DeviceTensor(device, DType::F32, {tokens, dims.q});
    lse_head = DeviceTensor(device, DType::F32, {tokens, split_heads});
    lse_tail = DeviceTensor(device, DType::F32, {tokens, split_heads});
  }

  void ensure(int64_t n) {
    if (tokens >= n) return;
    ++generation;
    tokens = n;
    auto f32 = [this](int64_t rows, int64_t cols) { return DeviceTensor(device, DType::F32, {rows, cols}); };
    x = f32(n, dims.hidden);
    h = f32(n, dims.hidden);
    q = f32(n, dims.q);
    k = f32(n, dims.kv);
    v = f32(n, dims.kv);
    attn = f32(n, dims.q);
    gate = f32(n, dims.ffn);
    up = f32(n, dims.ffn);
    fused = f32(1, std::max(dims.q + 2 * dims.kv, 2 * dims.ffn));
    if (dims.experts > 0) {
      const int64_t pairs = n * dims.top_k;
      router = f32(n, dims.experts);
      route_weights = f32(n, dims.top_k);
      route_ids = DeviceTensor(device, DType::I32, {n, dims.top_k});
      expert_x = f32(pairs, dims.hidden);
      expert_act = f32(pairs, dims.expert_ffn);
      expert_up = f32(pairs, dims.expert_ffn);
      expert_y = f32(pairs, dims.hidden);
      routed = f32(n, dims.hidden);
      shared = f32(n, dims.hidden);
      shared_gate = f32(n, 1);
      expert_plan = DeviceTensor(device, DType::I32, {ops::moe_plan_size(pairs, dims.experts)});
    }
  }
};

// A [1, cols] view at column `offset` of a one-row buffer.
inline Tensor row_slice(const DeviceTensor& t, int64_t offset, int64_t cols) {
  return Tensor(DType::F32, {1, cols}, t.tensor.ptr<float>() + offset, t.tensor.device);
}

// The first n rows of a buffer, `cols` wide (a layer narrower than the widest).
inline Tensor rows_of(const DeviceTensor& t, int64_t n, int64_t cols) {
  return Tensor(DType::F32, {n, cols}, t.tensor.data, t.tensor.device);
}

}  // namespace corvid::layers
