// Runner: what turns the engine's view of a step (sequences, block tables) into
// a model's Step and runs it: token and position lists, KV slot mapping per layer
// group, the padding of decode batches, the upload of a step's inputs (one copy
// of one packed buffer), CUDA-graph recordings, and the logits buffer. The model
// (models/model.h) sees only the Step; every family shares this code.
//
// Recordings: on a device that records work, single-token steps over a
// contiguous cache after the first run from one recording, and decode-only
// batches from one recording per (padded batch, table width) bucket: the batch is
// padded to a power of two with rows that write nowhere (slot -1) and read block
// 0, the block tables to a power-of-two width. A recording is re-made when any
// buffer it holds moves (the KV store's, the model's scratch, the logits, the
// step inputs', the backend's own).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_store.h"
#include "corvid/models/model.h"

namespace corvid {

// One sequence's share of a batched step (Runner::forward_batch).
struct BatchSequence {
  std::span<const int32_t> tokens;       // the new tokens: a prefill chunk or one decode token
  int32_t start = 0;                     // position of tokens[0]; earlier positions are in the pool
  // Its block table in each KV group of the store (kv/kv_manager.h), indexed by position /
  // block_size and covering [0, start + tokens.size()); negative entries (blocks a sliding
  // group released) lie before every query's window and are never read.
  std::span<const std::vector<int32_t>> block_tables;
  bool logits = false;                   // compute logits for its last token
};

class Runner {
 public:
  explicit Runner(Model& model);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Model& model() const { return model_; }
  const ModelConfig& config() const { return model_.config(); }
  Device device() const { return model_.device(); }

  // Runs `tokens` at `positions` (same length), writing their keys and values into
  // `kv` at those positions; earlier positions must already be in `kv`.
  // logits: [n, vocab] when all_logits, else [1, vocab] for the last token (F32), on
  // the host or on the model's device (host logits are copied back from the device).
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
               const Tensor& logits, bool all_logits);

  // One step over many sequences of different lengths (prefill chunks and decode tokens
  // together): every matmul runs over the concatenated tokens, attention runs per token
  // over its own sequence's blocks in the paged store `kv` (keys and values of the new
  // tokens are written there first). logits: F32 [number of sequences with logits set, vocab], in
  // batch order, on the host or the model's device. On the CPU a sequence gets the same
  // bits as forward() gives it alone (matmul and attention are batch invariant).
  // output = Hidden: `logits` is F32 [sequences with logits set, hidden_size] instead and
  // gets their last tokens' final hidden states (last-token embeddings; never recorded).
  void forward_batch(std::span<const BatchSequence> batch, const KvStore& kv, const Tensor& logits,
                     StepOutput output = StepOutput::Logits);

  // An encoder's step (a model that keeps no state per sequence, models/bert.cc): each
  // sequence whole (tokens at positions 0..), attention inside each, and `hidden` F32
  // [total tokens, hidden_size] (host or the model's device) gets every token's final
  // hidden state, in batch order.
  void encode(std::span<const std::span<const int32_t>> sequences, const Tensor& hidden);

  // Recording on (the default) or off (every op runs eagerly).
  void set_step_recording(bool on) { record_steps_ = on; }
  // Whether the last single-token step ran from a recording (false: eager, or recording failed).
  bool step_recorded() const { return record_steps_ && single_.id >= 0; }

  // Decode-only batches up to this size run from recordings (per padded batch size).
  static constexpr int64_t kMaxRecordedBatch = 256;

 private:
  // What a recording was made against; any change makes it stale.
  struct Recording {
    int64_t id = -1;
    uint64_t kv = 0;
    const void* logits = nullptr;
    uint64_t model_generation = 0, backend_generation = 0, logits_generation = 0, inputs_generation = 0;
    bool warm = false;  // the shape ran once eagerly (scratch and library state at size)
    bool same_inputs(const Recording& o) const {
      return kv == o.kv && logits == o.logits && model_generation == o.model_generation &&
             backend_generation == o.backend_generation && logits_generation == o.logits_generation &&
             inputs_generation == o.inputs_generation;
    }
  };

  // Runs `run` from recording `rec` (made first when stale); false when recording failed.
  template <class Fn>
  bool run_recorded(Recording& rec, const Recording& want, Fn run);
  // Where logits are computed: `logits` itself, or device scratch copied to host `logits` after.
  Tensor logits_target(const Tensor& logits, int64_t rows);
  // The first `rows` rows of the device logits scratch (grown as needed).
  Tensor device_logits(int64_t rows);
  // The same for hidden states [rows, hidden_size].
  Tensor device_hidden(int64_t rows);
  void check_logits(const Tensor& logits, int64_t rows, const char* op,
                    StepOutput output = StepOutput::Logits) const;
  Recording wanted(const KvStore& kv, const Tensor& out) const;
  // Copies the packed inputs to the device (a model on a GPU) and makes the Step's views.
  // Where each array of a step's packed int32 inputs starts: tokens, positions and
  // query_seq [n each], then per KV group its slots [n], its positions [n] (models/model.h
  // StepKvGroup) and block tables [seqs * width].
  struct InputLayout {
    int64_t n = 0, seqs = 0, width = 0;
    int64_t positions() const { return n; }
    int64_t query_seq() const { return 2 * n; }
    int64_t slots(int64_t group) const { return 3 * n + group * (2 * n + seqs * width); }
    int64_t group_positions(int64_t group) const { return slots(group) + n; }
    int64_t tables(int64_t group) const { return slots(group) + 2 * n; }
    int64_t size(int64_t groups) const { return slots(groups); }
  };
  // Copies the packed inputs to the device (a model on a GPU) and makes the Step's views:
  // paged, every array of `layout`; contiguous, tokens and positions, and the groups'
  // slots and positions when the store has several (the delayed switch), else the slots
  // are the positions; no store: an encoder's step.
  void stage(const KvStore* kv, const InputLayout& layout, bool paged);

  Model& model_;
  bool record_steps_ = true;
  int failed_recordings_ = 0;  // captures that threw (run_recorded gives up after two)
  bool warm_ = false;  // a contiguous forward has run: constant inputs (RoPE tables) are on the device
  Recording single_;
  std::map<std::pair<int64_t, int64_t>, Recording> batches_;
  DeviceTensor device_logits_;  // [rows, vocab]: logits before the copy to the host
  uint64_t logits_generation_ = 0;
  std::vector<int32_t> inputs_;  // a step's int32 inputs, laid out as InputLayout says
  DeviceBuffer device_inputs_;
  size_t device_inputs_capacity_ = 0;  // in elements
  uint64_t inputs_generation_ = 0;
  std::vector<StepKvGroup> groups_;
  std::vector<int64_t> out_rows_;
  std::vector<int64_t> sequence_starts_;  // encode()'s
  DeviceTensor device_hidden_;            // encode()'s output on the device, before the copy to the host
  Step step_;
};

}  // namespace corvid
