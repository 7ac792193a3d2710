#include "corvid/models/llama.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/models/rope_scaling.h"

namespace corvid {

namespace {

// Fetches a weight and checks its shape (outermost-first, as PyTorch stores it).
Tensor expect(const WeightSet& w, const std::string& name, std::initializer_list<int64_t> shape) {
  const Tensor& t = w.get(name);
  Tensor want(t.dtype, shape, nullptr);
  bool same = want.ndim == t.ndim;
  for (int i = 0; same && i < t.ndim; ++i) same = want.shape[static_cast<size_t>(i)] == t.shape[static_cast<size_t>(i)];
  if (!same) fail(w.source, ": tensor ", name, " has shape ", t.shape_str(), ", the config implies ", want.shape_str());
  return t;
}

const Tensor* optional_weight(const WeightSet& w, const std::string& name, int64_t size) {
  if (!w.has(name)) return nullptr;
  const Tensor& t = w.tensors.at(name);
  if (t.numel() != size || t.ndim != 1) fail(w.source, ": tensor ", name, " has shape ", t.shape_str(), ", expected [", size, "]");
  return &t;
}

// The parts as one [sum of rows, cols] matrix if they lie back to back in memory with
// the same dtype and width; otherwise an empty tensor.
Tensor fuse_rows(std::initializer_list<const Tensor*> parts) {
  const Tensor* first = *parts.begin();
  const char* expected = static_cast<const char*>(first->data);
  int64_t rows = 0;
  for (const Tensor* p : parts) {
    if (p->dtype != first->dtype || p->cols() != first->cols() || p->data != expected) return Tensor();
    rows += p->rows();
    expected += p->nbytes();
  }
  return Tensor(first->dtype, {rows, first->cols()}, first->data, first->device);
}

// CORVID_NO_FUSION=1 turns the fused decode GEMVs off, for A/B benchmarks.
bool fuse_projections() {
  static const bool fuse = !env_flag("CORVID_NO_FUSION");
  return fuse;
}

}  // namespace

LlamaModel::LlamaModel(const ModelConfig& config, const WeightSet& weights)
    : config_(config), weights_(weights), rope_(make_rope_params(config)) {
  const ModelConfig& c = config_;
  CORVID_CHECK(c.hidden_act == "silu", weights.source, ": hidden_act ", c.hidden_act, " is not supported (silu only)");
  CORVID_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, weights.source,
               ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
               c.num_key_value_heads);
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_dim = c.num_attention_heads * D, kv_dim = c.num_key_value_heads * D;
  apply_rope_freq_factors(weights);
  embed_tokens_ = expect(weights, "model.embed_tokens.weight", {c.vocab_size, H});
  device_ = embed_tokens_.device;
  for (const auto& [name, t] : weights.tensors)
    CORVID_CHECK(t.device == device_, weights.source, ": tensor ", name, " is on ", device_name(t.device),
                 ", the model's other weights on ", device_name(device_));
  final_norm_ = expect(weights, "model.norm.weight", {H});
  if (weights.has("lm_head.weight")) {
    lm_head_ = expect(weights, "lm_head.weight", {c.vocab_size, H});
  } else {
    CORVID_CHECK(c.tie_word_embeddings, weights.source, ": missing tensor lm_head.weight (tie_word_embeddings is false)");
    lm_head_ = embed_tokens_;
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer L;
    L.input_norm = expect(weights, p + "input_layernorm.weight", {H});
    L.post_attention_norm = expect(weights, p + "post_attention_layernorm.weight", {H});
    L.q_proj = expect(weights, p + "self_attn.q_proj.weight", {q_dim, H});
    L.k_proj = expect(weights, p + "self_attn.k_proj.weight", {kv_dim, H});
    L.v_proj = expect(weights, p + "self_attn.v_proj.weight", {kv_dim, H});
    L.o_proj = expect(weights, p + "self_attn.o_proj.weight", {H, q_dim});
    L.q_bias = optional_weight(weights, p + "self_attn.q_proj.bias", q_dim);
    L.k_bias = optional_weight(weights, p + "self_attn.k_proj.bias", kv_dim);
    L.v_bias = optional_weight(weights, p + "self_attn.v_proj.bias", kv_dim);
    if (c.attention_bias) {
      CORVID_CHECK(L.q_bias && L.k_bias && L.v_bias, weights.source, ": layer ", i,
                   " lacks the q/k/v biases the config requires");
    }
    L.q_norm = optional_weight(weights, p + "self_attn.q_norm.weight", D);
    L.k_norm = optional_weight(weights, p + "self_attn.k_norm.weight", D);
    if (c.qk_norm) CORVID_CHECK(L.q_norm && L.k_norm, weights.source, ": layer ", i, " lacks q_norm/k_norm weights");
    L.gate_proj = expect(weights, p + "mlp.gate_proj.weight", {I, H});
    L.up_proj = expect(weights, p + "mlp.up_proj.weight", {I, H});
    L.down_proj = expect(weights, p + "mlp.down_proj.weight", {H, I});
    if (fuse_projections()) {
      if (!L.q_bias && !L.k_bias && !L.v_bias) L.qkv_proj = fuse_rows({&L.q_proj, &L.k_proj, &L.v_proj});
      L.gate_up_proj = fuse_rows({&L.gate_proj, &L.up_proj});
    }
    layers_.push_back(L);
  }
}

LlamaModel::~LlamaModel() {
  if (recording_.id >= 0) device_backend(device_).drop(recording_.id);
  for (const auto& [shape, rec] : batch_recordings_)
    if (rec.id >= 0) device_backend(device_).drop(rec.id);
}

void LlamaModel::apply_rope_freq_factors(const WeightSet& weights) {
  // GGUF files of Llama 3.x store their RoPE scaling as one divisor per frequency
  // (llama.cpp's rope_freqs), computed by the converter from the llama3 rope_scaling.
  if (!weights.has("rope_freqs.weight")) return;
  const Tensor& f = weights.get("rope_freqs.weight");
  CORVID_CHECK(f.dtype == DType::F32 && f.numel() == static_cast<int64_t>(rope_.inv_freq.size()), weights.source,
               ": tensor rope_freqs.weight must be F32 with ", rope_.inv_freq.size(), " values, got ",
               dtype_name(f.dtype), " ", f.shape_str());
  // The tensor may already be on the GPU: read it through a host copy.
  std::vector<float> divisors(rope_.inv_freq.size());
  copy_bytes(divisors.data(), Device::CPU, f.data, f.device, divisors.size() * sizeof(float));
  for (size_t i = 0; i < rope_.inv_freq.size(); ++i) {
    const float divisor = divisors[i];
    CORVID_CHECK(std::isfinite(divisor) && divisor > 0, weights.source, ": rope_freqs.weight[", i, "] is ", divisor);
    rope_.inv_freq[i] /= divisor;
  }
}

void LlamaModel::ensure_workspace(int64_t n) {
  if (ws_.tokens >= n) return;
  ++ws_.generation;
  const ModelConfig& c = config_;
  const int64_t q_dim = c.num_attention_heads * c.head_dim, kv_dim = c.num_key_value_heads * c.head_dim;
  const Device d = device_;
  ws_.tokens = n;
  ws_.x = DeviceTensor(d, DType::F32, {n, c.hidden_size});
  ws_.h = DeviceTensor(d, DType::F32, {n, c.hidden_size});
  ws_.q = DeviceTensor(d, DType::F32, {n, q_dim});
  ws_.k = DeviceTensor(d, DType::F32, {n, kv_dim});
  ws_.v = DeviceTensor(d, DType::F32, {n, kv_dim});
  ws_.attn = DeviceTensor(d, DType::F32, {n, q_dim});
  ws_.gate = DeviceTensor(d, DType::F32, {n, c.intermediate_size});
  ws_.up = DeviceTensor(d, DType::F32, {n, c.intermediate_size});
  ws_.fused = DeviceTensor(d, DType::F32, {1, std::max(q_dim + 2 * kv_dim, 2 * c.intermediate_size)});
}

// A [1, cols] view at column `offset` of a one-row buffer.
static Tensor row_slice(const DeviceTensor& t, int64_t offset, int64_t cols) {
  return Tensor(DType::F32, {1, cols}, t.tensor.ptr<float>() + offset, t.tensor.device);
}

LlamaModel::Qkv LlamaModel::project_qkv(const Layer& L, int64_t n) {
  const ModelConfig& c = config_;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Tensor h = ws_.h.rows(n);
  Tensor q = ws_.q.rows(n), k = ws_.k.rows(n), v = ws_.v.rows(n);
  if (n == 1 && L.qkv_proj.data) {
    // One token: q, k and v are consecutive slices of one GEMV's output row.
    ops::matmul(h, L.qkv_proj, row_slice(ws_.fused, 0, (Hq + 2 * Hkv) * D));
    q = row_slice(ws_.fused, 0, Hq * D);
    k = row_slice(ws_.fused, Hq * D, Hkv * D);
    v = row_slice(ws_.fused, (Hq + Hkv) * D, Hkv * D);
  } else {
    ops::matmul(h, L.q_proj, q, L.q_bias);
    ops::matmul(h, L.k_proj, k, L.k_bias);
    ops::matmul(h, L.v_proj, v, L.v_bias);
  }
  Tensor q_heads = q.reshaped({n, Hq, D}), k_heads = k.reshaped({n, Hkv, D});
  if (L.q_norm) ops::rms_norm(q_heads, *L.q_norm, eps, q_heads);
  if (L.k_norm) ops::rms_norm(k_heads, *L.k_norm, eps, k_heads);
  return {q_heads, k_heads, v.reshaped({n, Hkv, D})};
}

void LlamaModel::finish_attention(const Layer& L, int64_t n) {
  Tensor x = ws_.x.rows(n), h = ws_.h.rows(n), attn = ws_.attn.rows(n);
  ops::matmul(attn, L.o_proj, h);
  ops::add_rms_norm(x, h, L.post_attention_norm, static_cast<float>(config_.rms_norm_eps), h);
}

void LlamaModel::attention_block(const Layer& L, int64_t index, std::span<const int32_t> positions, KVCache& kv,
                                 int64_t n) {
  const ModelConfig& c = config_;
  const int64_t Hq = c.num_attention_heads, D = c.head_dim;
  const Qkv qkv = project_qkv(L, n);
  const Tensor& k_cache = kv.keys(index);
  const Tensor& v_cache = kv.values(index);
  // Positions were checked against the capacity in forward(); the cache row of a
  // position is the position itself.
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t window = c.sliding_window.value_or(0);
  ops::rope_store_kv_attention(qkv.q, qkv.k, qkv.v, positions, rope_, k_cache, v_cache, scale, window,
                               ws_.attn.rows(n).reshaped({n, Hq, D}));
  finish_attention(L, n);
}

void LlamaModel::mlp_block(const Layer& L, int64_t n, const Tensor* next_norm) {
  Tensor x = ws_.x.rows(n), h = ws_.h.rows(n);
  Tensor gate = ws_.gate.rows(n), up = ws_.up.rows(n);
  const int64_t I = config_.intermediate_size;
  if (n == 1 && L.gate_up_proj.data) {
    // One token: one GEMV over the gate and up rows (on the GPU also the silu_mul).
    ops::matmul_silu_mul(h, L.gate_up_proj, row_slice(ws_.fused, 0, 2 * I), gate);
  } else {
    ops::matmul(h, L.gate_proj, gate);
    ops::matmul(h, L.up_proj, up);
    ops::silu_mul(gate, up, gate);
  }
  ops::matmul(gate, L.down_proj, h);
  if (next_norm) {
    ops::add_rms_norm(x, h, *next_norm, static_cast<float>(config_.rms_norm_eps), h);
  } else {
    ops::add(x, h);
  }
}

void LlamaModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                         const Tensor& logits, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CORVID_CHECK(n > 0 && positions.size() == tokens.size(), "forward: need one position per token");
  for (int32_t t : tokens) {
    CORVID_CHECK(t >= 0 && t < config_.vocab_size, "forward: token id ", t, " is outside the vocabulary (",
                 config_.vocab_size, ")");
  }
  const int64_t n_out = all_logits ? n : 1;
  CORVID_CHECK(logits.dtype == DType::F32 && logits.rows() == n_out && logits.cols() == config_.vocab_size,
               "forward: logits must be F32 [", n_out, ", ", config_.vocab_size, "]");
  CORVID_CHECK(logits.device == Device::CPU || logits.device == device_, "forward: logits on ",
               device_name(logits.device), " for a model on ", device_name(device_));
  CORVID_CHECK(kv.device() == device_, "forward: KV cache on ", device_name(kv.device()), " for a model on ",
               device_name(device_));
  for (int32_t pos : positions) {
    CORVID_CHECK(pos >= 0 && pos < kv.capacity(), "position ", pos, " is outside the KV cache (capacity ",
                 kv.capacity(), ")");
  }
  ensure_workspace(n);
  // Device model, host logits (the sampler runs on the CPU): compute on the device, copy back.
  const bool host_logits = logits.device != device_;
  if (host_logits && (!ws_.logits.buffer.data() || ws_.logits.tensor.rows() < n_out)) {
    ws_.logits = DeviceTensor(device_, DType::F32, {n_out, config_.vocab_size});
    ++ws_.generation;
  }
  const Tensor out = host_logits ? ws_.logits.rows(n_out) : logits;
  DeviceBackend& backend = device_backend(device_);
  if (n == 1 && record_steps_ && warm_ && backend.supports_capture()) {
    run_recorded(tokens, positions, kv, out);
  } else {
    run(tokens, positions, kv, out);
  }
  warm_ = true;
  if (host_logits) copy_tensor(logits, out);
}

void LlamaModel::run(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                     const Tensor& out) {
  const int64_t n = static_cast<int64_t>(tokens.size()), n_out = out.rows();
  Tensor x = ws_.x.rows(n);
  ops::embedding(embed_tokens_, tokens, x);
  ops::rms_norm(x, layers_[0].input_norm, static_cast<float>(config_.rms_norm_eps), ws_.h.rows(n));
  for (size_t i = 0; i < layers_.size(); ++i) {
    attention_block(layers_[i], static_cast<int64_t>(i), positions, kv, n);
    mlp_block(layers_[i], n, i + 1 < layers_.size() ? &layers_[i + 1].input_norm : nullptr);
  }
  // Only the rows whose logits are wanted go through the final norm and the (large) output matrix.
  Tensor last = Tensor(DType::F32, {n_out, config_.hidden_size}, x.row(n - n_out), device_);
  Tensor h = ws_.h.rows(n_out);
  ops::rms_norm(last, final_norm_, static_cast<float>(config_.rms_norm_eps), h);
  ops::matmul(h, lm_head_, out);
}

// Identifies a KV cache by every buffer a recorded step writes or reads (a new cache can
// reuse an old one's first address and still differ elsewhere).
static uint64_t kv_signature(const KVCache& kv, int64_t layers) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(kv.capacity());
  for (int64_t l = 0; l < layers; ++l) {
    for (const void* p : {kv.keys(l).data, kv.values(l).data}) {
      h ^= reinterpret_cast<uintptr_t>(p);
      h *= 1099511628211ull;
    }
  }
  return h;
}

// Decode issues ~16 small launches per layer; recorded once, a step is one graph launch.
// Every host input of the step (token id, position) is staged in device memory first,
// and the kernels read it from there, so one recording serves every position.
void LlamaModel::run_recorded(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                              const Tensor& out) {
  DeviceBackend& backend = device_backend(device_);
  backend.stage_inputs({tokens, positions, positions, {}, {}});
  const StepRecording want{-1, kv_signature(kv, static_cast<int64_t>(layers_.size())), out.data, ws_.generation,
                           backend.layout_generation()};
  const bool stale = recording_.id < 0 || recording_.kv != want.kv || recording_.logits != want.logits ||
                     recording_.workspace_generation != want.workspace_generation ||
                     recording_.backend_generation != want.backend_generation;
  if (stale) {
    if (recording_.id >= 0) backend.drop(recording_.id);
    recording_ = StepRecording{};
    backend.begin_capture();
    try {
      run(tokens, positions, kv, out);
    } catch (const Error&) {
      // Something in the step cannot be recorded: run it eagerly from now on.
      backend.abort_capture();
      record_steps_ = false;
      run(tokens, positions, kv, out);
      return;
    }
    recording_ = want;
    recording_.id = backend.end_capture();
  }
  backend.replay(recording_.id);
}

int64_t LlamaModel::weight_bytes_per_token() const {
  int64_t total = static_cast<int64_t>(final_norm_.nbytes() + lm_head_.nbytes());
  for (const Layer& L : layers_) {
    for (const Tensor* t : {&L.input_norm, &L.post_attention_norm, &L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj,
                            &L.gate_proj, &L.up_proj, &L.down_proj})
      total += static_cast<int64_t>(t->nbytes());
    for (const Tensor* t : {L.q_bias, L.k_bias, L.v_bias, L.q_norm, L.k_norm})
      if (t) total += static_cast<int64_t>(t->nbytes());
  }
  return total;
}

int64_t LlamaModel::parameter_count() const {
  int64_t total = 0;
  for (const auto& [name, t] : weights_.tensors) total += t.numel();
  return total;
}

}  // namespace corvid
