#include "corvid/models/layers/attention.h"

#include <cmath>

#include "corvid/core/error.h"

namespace corvid::layers {

void load_attention(WeightLoader& w, const std::string& p, int64_t hidden, const AttentionWeights& opts,
                    Attention& a) {
  const int64_t q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
  if (a.shares_kv) {
    a.q_proj = w.get(p + "q_proj.weight", {q_dim, hidden});
    for (const char* name : {"k_proj.weight", "v_proj.weight", "k_norm.weight"}) w.ignore(p + name);
  } else if (a.v_from_k) {
    a.q_proj = w.get(p + "q_proj.weight", {q_dim, hidden});
    a.k_proj = w.get(p + "k_proj.weight", {kv_dim, hidden});
  } else if (!opts.qkv_bias) {
    WeightLoader::Fused f = w.fused({{p + "q_proj.weight", {q_dim, hidden}},
                                     {p + "k_proj.weight", {kv_dim, hidden}},
                                     {p + "v_proj.weight", {kv_dim, hidden}}});
    a.q_proj = f.parts[0], a.k_proj = f.parts[1], a.v_proj = f.parts[2];
    a.qkv_proj = f.whole;
  } else {
    a.q_proj = w.get(p + "q_proj.weight", {q_dim, hidden});
    a.k_proj = w.get(p + "k_proj.weight", {kv_dim, hidden});
    a.v_proj = w.get(p + "v_proj.weight", {kv_dim, hidden});
  }
  a.o_proj = w.get(p + "o_proj.weight", {hidden, q_dim});
  CORVID_CHECK(!(opts.qkv_bias && (a.shares_kv || a.v_from_k)), w.source(),
               ": q/k/v biases with shared or key-derived values are not supported");
  if (opts.qkv_bias) {
    a.q_bias = w.get(p + "q_proj.bias", {q_dim}, WeightRole::Bias);
    a.k_bias = w.get(p + "k_proj.bias", {kv_dim}, WeightRole::Bias);
    a.v_bias = w.get(p + "v_proj.bias", {kv_dim}, WeightRole::Bias);
  }
  if (opts.o_bias) a.o_bias = w.get(p + "o_proj.bias", {hidden}, WeightRole::Bias);
  if (a.qk_norm == QkNorm::PerHead) {
    a.q_norm = w.norm(p + "q_norm.weight", a.head_dim, opts.norm_plus_one);
    if (!a.shares_kv) a.k_norm = w.norm(p + "k_norm.weight", a.head_dim, opts.norm_plus_one);
  } else if (a.qk_norm == QkNorm::Whole) {
    CORVID_CHECK(!a.shares_kv, w.source(), ": a whole-projection q/k norm on a KV-shared layer");
    a.q_norm = w.norm(p + "q_norm.weight", q_dim, opts.norm_plus_one);
    a.k_norm = w.norm(p + "k_norm.weight", kv_dim, opts.norm_plus_one);
  }
}

Attention attention_geometry(const ModelConfig& c, int64_t layer) {
  Attention a;
  a.layer = layer;
  a.heads = c.num_attention_heads, a.kv_heads = c.num_key_value_heads, a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.eps = static_cast<float>(c.rms_norm_eps);
  return a;
}

LayerState Attention::state() const {
  return window > 0 ? LayerState{StateKind::SlidingKV, kv_heads, head_dim, window}
                    : LayerState{StateKind::FullKV, kv_heads, head_dim};
}

int64_t Attention::weight_bytes() const {
  int64_t total = 0;
  for (const Tensor* t :
       {&q_proj, &k_proj, &v_proj, &o_proj, &q_bias, &k_bias, &v_bias, &o_bias, &q_norm, &k_norm, &v_norm})
    if (t->data) total += static_cast<int64_t>(t->nbytes());
  return total;
}

static const Tensor* bias(const Tensor& t) { return t.data ? &t : nullptr; }

void Attention::attend_split(const Tensor& q, const Tensor* k, const Tensor* v, const Step& step, Scratch& s,
                             const Tensor& attn) const {
  const KvStore& kv = *step.kv;
  const StepKvGroup& tail = step.group(layer);
  const StepKvGroup& head = step.groups[static_cast<size_t>(kv.head_group_of(layer))];
  if (k) {
    // A token's slot is -1 in the part that does not keep its position.
    ops::store_kv(*k, *v, head.slots, kv.head_keys(layer), kv.head_values(layer));
    ops::store_kv(*k, *v, tail.slots, kv.keys(layer), kv.values(layer));
  }
  const int64_t n = q.dim(0);
  s.ensure_split(heads);
  const Tensor other = rows_of(s.attn_tail, n, heads * head_dim).reshaped({n, heads, head_dim});
  const Tensor lse_head = rows_of(s.lse_head, n, heads), lse_tail = rows_of(s.lse_tail, n, heads);
  auto part = [&](const Tensor& keys, const Tensor& values, const StepKvGroup& g, const Tensor& out,
                  const Tensor& lse) {
    if (kv.paged()) ops::paged_attention(q, keys, values, g.paged, g.positions, scale, window, out, &lse);
    else ops::attention(q, keys, values, g.positions, scale, window, out, &lse);
  };
  part(kv.head_keys(layer), kv.head_values(layer), head, attn, lse_head);
  part(kv.keys(layer), kv.values(layer), tail, other, lse_tail);
  ops::merge_attention(attn, lse_head, other, lse_tail);
}

void Attention::forward(const Tensor& h, const Step& step, Scratch& s, const Tensor& out) const {
  const int64_t n = h.rows(), q_dim = heads * head_dim, kv_dim = kv_heads * head_dim;
  Tensor q = rows_of(s.q, n, q_dim), k = rows_of(s.k, n, kv_dim), v = rows_of(s.v, n, kv_dim);
  const Tensor attn = rows_of(s.attn, n, q_dim).reshaped({n, heads, head_dim});
  const KvStore& kv = *step.kv;
  const Tensor& k_cache = kv.keys(layer);
  const Tensor& v_cache = kv.values(layer);
  const KvFormat format = kv.format(layer);
  if (shares_kv) {
    // Another layer stored this position's keys and values: only the query is new.
    ops::matmul(h, q_proj, q, bias(q_bias));
    const Tensor q_heads = q.reshaped({n, heads, head_dim});
    if (qk_norm == QkNorm::PerHead) ops::rms_norm(q_heads, q_norm, eps, q_heads);
    ops::rope(q_heads, step.positions, rope);
    if (format.rotate_keys) ops::hadamard_rotate(q_heads);
    if (kv.head_group_of(layer) >= 0) {
      attend_split(q_heads, nullptr, nullptr, step, s, attn);
    } else if (!kv.paged()) {
      ops::attention(q_heads, k_cache, v_cache, step.positions, scale, window, attn);
    } else {
      ops::paged_attention(q_heads, k_cache, v_cache, step.group(layer).paged, step.positions, scale, window, attn);
    }
    if (format.rotate_values) ops::hadamard_unrotate(attn);
    ops::matmul(rows_of(s.attn, n, q_dim), o_proj, out, bias(o_bias));
    return;
  }
  if (n == 1 && qkv_proj.data) {
    // One token: q, k and v are consecutive slices of one GEMV's output row.
    ops::matmul(h, qkv_proj, row_slice(s.fused, 0, q_dim + 2 * kv_dim));
    q = row_slice(s.fused, 0, q_dim);
    k = row_slice(s.fused, q_dim, kv_dim);
    v = row_slice(s.fused, q_dim + kv_dim, kv_dim);
  } else {
    ops::matmul(h, q_proj, q, bias(q_bias));
    ops::matmul(h, k_proj, k, bias(k_bias));
    if (!v_from_k) ops::matmul(h, v_proj, v, bias(v_bias));
  }
  if (qk_norm == QkNorm::Whole) {
    ops::rms_norm(q, q_norm, eps, q);
    ops::rms_norm(k, k_norm, eps, k);
  }
  const Tensor q_heads = q.reshaped({n, heads, head_dim}), k_heads = k.reshaped({n, kv_heads, head_dim});
  const Tensor v_heads = v.reshaped({n, kv_heads, head_dim});
  if (v_from_k) {
    // The values are the raw key projection, normed (before k_norm and RoPE touch it).
    ops::rms_norm(k_heads, v_norm, eps, v_heads);
  } else if (v_norm.data) {
    ops::rms_norm(v_heads, v_norm, eps, v_heads);
  }
  if (qk_norm == QkNorm::PerHead) {
    ops::rms_norm(q_heads, q_norm, eps, q_heads);
    ops::rms_norm(k_heads, k_norm, eps, k_heads);
  }
  if (format.rotated() || kv.head_group_of(layer) >= 0) {
    // Queries and keys in the rotated basis (q.k unchanged), stored and read as usual;
    // rotated values give a rotated output (a weighted sum of them), rotated back once.
    // (The delayed switch's head is rotated as its tail: kv_head_format.)
    ops::rope(q_heads, step.positions, rope);
    ops::rope(k_heads, step.positions, rope);
    if (format.rotate_keys) {
      ops::hadamard_rotate(q_heads);
      ops::hadamard_rotate(k_heads);
    }
    if (format.rotate_values) ops::hadamard_rotate(v_heads);
    if (kv.head_group_of(layer) >= 0) {
      attend_split(q_heads, &k_heads, &v_heads, step, s, attn);
    } else if (!kv.paged()) {
      ops::store_kv(k_heads, v_heads, step.positions, k_cache, v_cache);
      ops::attention(q_heads, k_cache, v_cache, step.positions, scale, window, attn);
    } else {
      const StepKvGroup& group = step.group(layer);
      ops::store_kv(k_heads, v_heads, group.slots, k_cache, v_cache);
      ops::paged_attention(q_heads, k_cache, v_cache, group.paged, step.positions, scale, window, attn);
    }
    if (format.rotate_values) ops::hadamard_unrotate(attn);
  } else if (!kv.paged()) {
    // Contiguous: a position's row is the position itself.
    ops::rope_store_kv_attention(q_heads, k_heads, v_heads, step.positions, rope, k_cache, v_cache, scale, window,
                                 attn);
  } else {
    const StepKvGroup& group = step.group(layer);
    ops::rope_store_kv(q_heads, k_heads, v_heads, step.positions, rope, group.slots, k_cache, v_cache);
    ops::paged_attention(q_heads, k_cache, v_cache, group.paged, step.positions, scale, window, attn);
  }
  ops::matmul(rows_of(s.attn, n, q_dim), o_proj, out, bias(o_bias));
}

}  // namespace corvid::layers
