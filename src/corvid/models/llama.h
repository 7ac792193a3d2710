// The Llama-family decoder (llama, mistral, qwen2, qwen3, SmolLM2), written once
// against ops::. Differences between the families are config flags: q/k/v
// biases (qwen2), per-head q/k RMSNorm (qwen3), sliding-window attention
// (mistral), tied embeddings, RoPE layout and scaling.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/ops/ops.h"

namespace corvid {

// One sequence's share of a batched step (LlamaModel::forward_batch).
struct BatchSequence {
  std::span<const int32_t> tokens;       // the new tokens: a prefill chunk or one decode token
  int32_t start = 0;                     // position of tokens[0]; earlier positions are in the pool
  std::span<const int32_t> block_table;  // its blocks, covering positions [0, start + tokens.size())
  bool logits = false;                   // compute logits for its last token
};

class LlamaModel {
 public:
  // Binds the weights (views; `weights` must outlive the model) and checks every
  // tensor's presence and shape against the config. The model runs on the device
  // its weights are on (all on one device); workspace and KV caches go there too.
  LlamaModel(const ModelConfig& config, const WeightSet& weights);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }

  // Runs `tokens` at `positions` (same length), writing their keys and values into
  // `kv` at those positions; earlier positions must already be in `kv`.
  // logits: [n, vocab] when all_logits, else [1, vocab] for the last token (F32), on
  // the host or on the model's device (host logits are copied back from the device).
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
               const Tensor& logits, bool all_logits);

  // One step over many sequences of different lengths (prefill chunks and decode tokens
  // together): every matmul runs over the concatenated tokens, attention runs per token
  // over its own sequence's blocks in `pool` (keys and values of the new tokens are
  // written there first). logits: F32 [number of sequences with logits set, vocab], in
  // batch order, on the host or the model's device. On the CPU a sequence gets the same
  // bits as forward() gives it alone (matmul and attention are batch invariant).
  void forward_batch(std::span<const BatchSequence> batch, BlockPool& pool, const Tensor& logits);

  // On a device that can record work (CUDA graphs), single-token forwards after the
  // first are recorded once and replayed (same kernels, same results; far fewer launches),
  // and so are decode-only forward_batch steps, one recording per padded batch shape.
  // On by default; off runs every op eagerly.
  void set_step_recording(bool on) { record_steps_ = on; }
  // Whether the last single-token step ran from a recording (false: eager, or recording failed).
  bool step_recorded() const { return record_steps_ && recording_.id >= 0; }

  // Decode-only batches up to this size run from recordings (per padded batch size).
  static constexpr int64_t kMaxRecordedBatch = 256;

  // Bytes of weights one decode step reads (everything but the embedding table,
  // unless it doubles as the output matrix), for bandwidth figures.
  int64_t weight_bytes_per_token() const;
  int64_t parameter_count() const;

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    Tensor q_proj, k_proj, v_proj, o_proj;
    const Tensor *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;
    const Tensor *q_norm = nullptr, *k_norm = nullptr;
    Tensor gate_proj, up_proj, down_proj;
    // q|k|v and gate|up as one matrix each when the weights lie back to back in memory
    // (upload_weights places them so): a decode step then runs one GEMV instead of
    // three (two). Empty (data == nullptr) when the weights are elsewhere or have biases.
    Tensor qkv_proj, gate_up_proj;
  };
  struct Workspace {
    int64_t tokens = 0;
    uint64_t generation = 0;  // bumped when the buffers move (a recorded step holds their addresses)
    DeviceTensor x, h, q, k, v, attn, gate, up;  // [tokens, width] F32 on the model's device
    DeviceTensor fused;                           // [1, q|k|v or gate|up]: a decode step's fused GEMV output
    DeviceTensor logits;                          // [rows, vocab]: device logits before the copy to the host
  };

  // The recorded single-token step and what it was recorded against.
  struct StepRecording {
    int64_t id = -1;
    uint64_t kv = 0;  // signature of the KV cache's buffers (every layer's addresses)
    const void* logits = nullptr;
    uint64_t workspace_generation = 0, backend_generation = 0;
  };

  // A recorded decode-only batch (forward_batch), per (padded rows, table width).
  struct BatchRecording {
    int64_t id = -1;
    uint64_t pool = 0;  // signature of the pool's buffers
    const void* logits = nullptr;
    uint64_t workspace_generation = 0, backend_generation = 0;
    bool warm = false;  // ran once eagerly at this shape
  };

  void apply_rope_freq_factors(const WeightSet& weights);
  // The layers of forward_batch over batch_'s n tokens (tables max_blocks wide).
  void run_batch(BlockPool& pool, int64_t max_blocks, int64_t n);
  // forward_batch for n sequences of one decode token each, from a recording.
  void forward_decode_recorded(BlockPool& pool, int64_t max_blocks, const Tensor& logits);
  void ensure_workspace(int64_t n);
  // Embedding, layers, final norm and output matrix into `out` ([n_out, vocab] on the device).
  void run(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv, const Tensor& out);
  void run_recorded(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                    const Tensor& out);
  // Both expect ws_.h = the block's input norm of ws_.x and end with the residual add,
  // fused with the next norm (next_norm; none after the last layer) into ws_.h.
  void attention_block(const Layer& layer, int64_t index, std::span<const int32_t> positions, KVCache& kv, int64_t n);
  // The two halves of attention_block around the KV cache (shared with forward_batch):
  // q/k/v projections (one fused GEMV for a single token when possible), q/k norms and
  // RoPE, returning q [n, Hq*D], k and v [n, Hkv*D] views; then the output projection
  // and the residual add fused with the post-attention norm into ws_.h.
  struct Qkv {
    Tensor q, k, v;
  };
  // q, k and v of the n tokens in ws_.h (q/k normed where the model has q_norm/k_norm),
  // as [n, heads, head_dim]; rope is applied with the store into the KV cache.
  Qkv project_qkv(const Layer& layer, int64_t n);
  void finish_attention(const Layer& layer, int64_t n);
  // Where logits are computed: `logits` itself, or device scratch copied to host `logits` after.
  Tensor logits_target(const Tensor& logits, int64_t n_out);
  // The final norm and output matrix over hidden rows `rows` of ws_.x, into out [rows.size(), vocab].
  void output_rows(std::span<const int64_t> rows, const Tensor& out);
  void mlp_block(const Layer& layer, int64_t n, const Tensor* next_norm);

  ModelConfig config_;
  const WeightSet& weights_;
  Device device_ = Device::CPU;
  ops::RopeParams rope_;
  Tensor embed_tokens_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  Workspace ws_;
  StepRecording recording_;
  std::map<std::pair<int64_t, int64_t>, BatchRecording> batch_recordings_;
  struct BatchScratch {  // host inputs of forward_batch, reused between steps
    std::vector<int32_t> tokens, positions, slots, query_seq, tables;
    std::vector<int64_t> logit_rows;
  } batch_;
  bool record_steps_ = true;
  bool warm_ = false;  // a forward has run: constant inputs (RoPE tables) are on the device
};

}  // namespace corvid
