// Attention: a decoder layer's self-attention, from its input (normed hidden rows)
// to its output projection: q/k/v projections (one fused GEMV for a single token
// when q|k|v lie back to back), optional q/k norms per head or over the whole
// projection, an optional weightless v norm (Gemma 4), RoPE (any frequencies;
// identity for NoPE layers), the store of the new keys and values, causal attention
// (optionally windowed) over the step's KV store, and o_proj. A layer may take its
// values from its raw key projection (Gemma 4's attention_k_eq_v) or read another
// layer's keys and values and store none (KV-shared layers). The variants a family
// needs are fields, not subclasses.
#pragma once

#include <cstdint>
#include <string>

#include "corvid/models/layers/scratch.h"
#include "corvid/models/model.h"
#include "corvid/models/weight_loader.h"

namespace corvid::layers {

enum class QkNorm {
  None,
  PerHead,  // RMSNorm over each head's head_dim (Qwen3, Gemma)
  Whole,    // RMSNorm over the whole q (k) projection (OLMo 2)
};

struct Attention {
  int64_t layer = 0;  // index into the KV store
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;     // multiplies q·k
  int64_t window = 0;  // keys visible to a query, itself included (0: all earlier ones)
  float eps = 1e-6f;   // of the q/k norms
  QkNorm qk_norm = QkNorm::None;
  ops::RopeParams rope;
  Tensor q_proj, k_proj, v_proj, o_proj;
  Tensor q_bias, k_bias, v_bias, o_bias;  // empty (data == nullptr) when absent
  Tensor q_norm, k_norm;
  Tensor v_norm;        // set: values are RMS-normed per head with it (ones: a weightless norm)
  bool v_from_k = false;     // no v_proj: the values are the raw key projection (before k_norm)
  bool shares_kv = false;    // no k/v projections: reads layer `layer`'s store (a SharedKV layer), writes none
  Tensor qkv_proj;  // q|k|v as one matrix when back to back (no biases), else empty

  // h [n, hidden] (may be `out`) → out [n, hidden]. Keys and values of the step's
  // tokens go to step.kv's layer `layer` at its group's slots.
  void forward(const Tensor& h, const Step& step, Scratch& scratch, const Tensor& out) const;
  // Bytes of its weights (what a decode step reads).
  int64_t weight_bytes() const;
  // What the layer keeps per sequence: SlidingKV with its window, else FullKV.
  LayerState state() const;

 private:
  // The delayed switch (kv/kv_store.h KvSegment): k and v (null for a layer that shares
  // another's store) go to the 16-bit head or the coded tail, by position; attention over
  // each part, merged into attn. q (and k, v) are roped and rotated as the format says.
  void attend_split(const Tensor& q, const Tensor* k, const Tensor* v, const Step& step, Scratch& s,
                    const Tensor& attn) const;
};

// The fields every decoder family sets alike: layer index, heads, KV heads and head_dim
// from the config, the q/k norm eps = rms_norm_eps, scale 1/sqrt(head_dim). The family
// sets the rest (norms, RoPE, window) and overrides what differs.
Attention attention_geometry(const ModelConfig& c, int64_t layer);

// Biases and norms a checkpoint's attention carries, in HF's layout under `prefix`
// ("model.layers.3.self_attn."): q_proj, k_proj, v_proj, o_proj (.weight/.bias),
// q_norm, k_norm.
struct AttentionWeights {
  bool qkv_bias = false, o_bias = false;
  bool norm_plus_one = false;  // q/k norms store w for (1 + w)
};
// With a.v_from_k there is no v_proj (and no fused q|k|v); with a.shares_kv only q_proj,
// q_norm and o_proj are loaded (the names of k_proj, v_proj and k_norm are ignored when present).
// Loads the projections and norms of `a` (whose shape fields are set) for a model of
// width `hidden`.
void load_attention(WeightLoader& w, const std::string& prefix, int64_t hidden, const AttentionWeights& opts,
                    Attention& a);

}  // namespace corvid::layers
