// LlamaModel::forward_batch: one step over many sequences with a paged KV cache
// (the serving engine's forward). Everything but attention runs over the
// concatenated tokens; attention reads each query's own blocks.
//
// Decode-only steps on a device that records work (CUDA graphs) run from a recording
// per (batch bucket, table-width bucket): the batch is padded to a power of two with
// rows that write nowhere (cache row -1) and read block 0, the block tables to a
// power-of-two width, so a handful of recordings serve every batch the scheduler forms.
#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/llama.h"

namespace corvid {

namespace {

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Identifies a pool by its buffers (a new pool may reuse an old one's first address).
uint64_t pool_signature(const BlockPool& pool) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(pool.num_blocks());
  for (int64_t l = 0; l < pool.num_layers(); ++l) {
    for (const void* p : {pool.keys(l).data, pool.values(l).data}) {
      h ^= reinterpret_cast<uintptr_t>(p);
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

Tensor LlamaModel::logits_target(const Tensor& logits, int64_t n_out) {
  if (logits.device == device_) return logits;
  if (!ws_.logits.buffer.data() || ws_.logits.tensor.rows() < n_out) {
    ws_.logits = DeviceTensor(device_, DType::F32, {n_out, config_.vocab_size});
    ++ws_.generation;
  }
  return ws_.logits.rows(n_out);
}

void LlamaModel::output_rows(std::span<const int64_t> rows, const Tensor& out) {
  const int64_t n_out = static_cast<int64_t>(rows.size()), H = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  bool identity = true;  // rows 0..n_out-1 (a decode step): no gather needed
  for (int64_t i = 0; i < n_out && identity; ++i) identity = rows[static_cast<size_t>(i)] == i;
  if (identity) {
    ops::rms_norm(ws_.x.rows(n_out), final_norm_, eps, ws_.h.rows(n_out));
    ops::matmul(ws_.h.rows(n_out), lm_head_, out);
    return;
  }
  // Gather the wanted rows of x into h, then norm them back into the front of x (free by now).
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
  for (int64_t i = 0; i < n_out; ++i) {
    copy_bytes(ws_.h.tensor.row(i), device_, ws_.x.tensor.row(rows[static_cast<size_t>(i)]), device_, row_bytes);
  }
  ops::rms_norm(ws_.h.rows(n_out), final_norm_, eps, ws_.x.rows(n_out));
  ops::matmul(ws_.x.rows(n_out), lm_head_, out);
}

void LlamaModel::forward_batch(std::span<const BatchSequence> batch, BlockPool& pool, const Tensor& logits) {
  const ModelConfig& c = config_;
  CORVID_CHECK(!batch.empty(), "forward_batch: empty batch");
  CORVID_CHECK(pool.device() == device_, "forward_batch: KV pool on ", device_name(pool.device()), " for a model on ",
               device_name(device_));
  CORVID_CHECK(pool.num_layers() == c.num_hidden_layers && pool.keys(0).dim(1) == c.num_key_value_heads &&
                   pool.keys(0).dim(2) == c.head_dim,
               "forward_batch: the KV pool was made for another model shape");
  const int64_t bs = pool.block_size();
  BatchScratch& b = batch_;
  b.tokens.clear();
  b.positions.clear();
  b.slots.clear();
  b.query_seq.clear();
  b.logit_rows.clear();
  size_t max_blocks = 1;
  for (const BatchSequence& seq : batch) max_blocks = std::max(max_blocks, seq.block_table.size());
  b.tables.assign(batch.size() * max_blocks, 0);
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSequence& seq = batch[s];
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    CORVID_CHECK(n > 0 && seq.start >= 0, "forward_batch: sequence ", s, " has no tokens or a negative start");
    CORVID_CHECK(static_cast<int64_t>(seq.block_table.size()) * bs >= seq.start + n, "forward_batch: sequence ", s,
                 " has ", seq.block_table.size(), " blocks of ", bs, " for ", seq.start + n, " positions");
    for (size_t i = 0; i < seq.block_table.size(); ++i) {
      const int32_t block = seq.block_table[i];
      CORVID_CHECK(block >= 0 && block < pool.num_blocks(), "forward_batch: sequence ", s, " names block ", block,
                   ", outside the pool of ", pool.num_blocks());
      b.tables[s * max_blocks + i] = block;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t t = seq.tokens[static_cast<size_t>(i)];
      CORVID_CHECK(t >= 0 && t < c.vocab_size, "forward_batch: token id ", t, " is outside the vocabulary (",
                   c.vocab_size, ")");
      const int64_t pos = seq.start + i;
      b.tokens.push_back(t);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slots.push_back(static_cast<int32_t>(seq.block_table[static_cast<size_t>(pos / bs)] * bs + pos % bs));
      b.query_seq.push_back(static_cast<int32_t>(s));
    }
    if (seq.logits) b.logit_rows.push_back(static_cast<int64_t>(b.tokens.size()) - 1);
  }
  const int64_t n = static_cast<int64_t>(b.tokens.size()), n_out = static_cast<int64_t>(b.logit_rows.size());
  CORVID_CHECK(logits.dtype == DType::F32 && logits.rows() == n_out && logits.cols() == c.vocab_size,
               "forward_batch: logits must be F32 [", n_out, ", ", c.vocab_size, "]");
  CORVID_CHECK(logits.device == Device::CPU || logits.device == device_, "forward_batch: logits on ",
               device_name(logits.device), " for a model on ", device_name(device_));

  const bool decode_only = n == static_cast<int64_t>(batch.size()) && n_out == n;
  if (decode_only && record_steps_ && n <= kMaxRecordedBatch && device_backend(device_).supports_capture()) {
    forward_decode_recorded(pool, static_cast<int64_t>(max_blocks), logits);
    return;
  }
  ensure_workspace(n);
  run_batch(pool, static_cast<int64_t>(max_blocks), n);
  if (n_out == 0) return;
  const Tensor out = logits_target(logits, n_out);
  output_rows(b.logit_rows, out);
  if (out.data != logits.data) copy_tensor(logits, out);
}

void LlamaModel::run_batch(BlockPool& pool, int64_t max_blocks, int64_t n) {
  const ModelConfig& c = config_;
  BatchScratch& b = batch_;
  const int64_t Hq = c.num_attention_heads, D = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t window = c.sliding_window.value_or(0);
  const ops::PagedKV paged{pool.block_size(), b.tables, max_blocks, b.query_seq};
  const float eps = static_cast<float>(c.rms_norm_eps);
  ops::embedding(embed_tokens_, b.tokens, ws_.x.rows(n));
  ops::rms_norm(ws_.x.rows(n), layers_[0].input_norm, eps, ws_.h.rows(n));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const Qkv qkv = project_qkv(L, n);
    const Tensor& k_pool = pool.keys(static_cast<int64_t>(l));
    const Tensor& v_pool = pool.values(static_cast<int64_t>(l));
    ops::rope_store_kv(qkv.q, qkv.k, qkv.v, b.positions, rope_, b.slots, k_pool, v_pool);
    ops::paged_attention(qkv.q, k_pool, v_pool, paged, b.positions, scale, window,
                         ws_.attn.rows(n).reshaped({n, Hq, D}));
    finish_attention(L, n);
    mlp_block(L, n, l + 1 < layers_.size() ? &layers_[l + 1].input_norm : nullptr);
  }
}

void LlamaModel::forward_decode_recorded(BlockPool& pool, int64_t max_blocks, const Tensor& logits) {
  BatchScratch& b = batch_;
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t rows = next_power_of_two(n), width = next_power_of_two(std::max<int64_t>(max_blocks, 4));
  // Pad: extra queries are sequences of their own at position 0 over block 0 whose
  // keys and values go nowhere; their logits are computed and ignored.
  std::vector<int32_t> tables(static_cast<size_t>(rows * width), 0);
  for (int64_t s = 0; s < n; ++s)
    std::copy_n(b.tables.begin() + s * max_blocks, max_blocks, tables.begin() + s * width);
  b.tables = std::move(tables);
  for (int64_t s = n; s < rows; ++s) {
    b.tokens.push_back(0);
    b.positions.push_back(0);
    b.slots.push_back(-1);
    b.query_seq.push_back(static_cast<int32_t>(s));
    b.logit_rows.push_back(s);
  }
  ensure_workspace(rows);
  if (!ws_.logits.buffer.data() || ws_.logits.tensor.rows() < rows) {
    ws_.logits = DeviceTensor(device_, DType::F32, {rows, config_.vocab_size});
    ++ws_.generation;
  }
  const Tensor out = ws_.logits.rows(rows);
  const Tensor wanted(DType::F32, {n, config_.vocab_size}, out.data, device_);  // the real rows
  auto run_eagerly = [&] {
    run_batch(pool, width, rows);
    output_rows(b.logit_rows, out);
  };

  DeviceBackend& backend = device_backend(device_);
  backend.stage_inputs({b.tokens, b.positions, b.slots, b.tables, b.query_seq});
  BatchRecording& rec = batch_recordings_[{rows, width}];
  const BatchRecording want{rec.id, pool_signature(pool), out.data, ws_.generation, backend.layout_generation(), true};
  if (!rec.warm) {
    // The first step of a shape runs eagerly: scratch, workspaces and library state
    // reach their sizes for it, so the recording (next time) allocates nothing.
    run_eagerly();
    rec = want;
    rec.id = -1;
  } else {
    const bool stale = rec.id < 0 || rec.pool != want.pool || rec.logits != want.logits ||
                       rec.workspace_generation != want.workspace_generation ||
                       rec.backend_generation != want.backend_generation;
    if (stale) {
      if (rec.id >= 0) backend.drop(rec.id);
      rec = want;
      rec.id = -1;
      backend.begin_capture();
      try {
        run_eagerly();
      } catch (const Error&) {
        // Something in the step cannot be recorded: run steps eagerly from now on.
        backend.abort_capture();
        record_steps_ = false;
        run_eagerly();
        copy_tensor(logits, wanted);
        return;
      }
      rec.id = backend.end_capture();
    }
    backend.replay(rec.id);
  }
  copy_tensor(logits, wanted);
}

}  // namespace corvid
