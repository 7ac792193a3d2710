// Model: the boundary between the engine and a model family. A family (one file
// under models/, composed from models/layers/) declares what each layer keeps per
// sequence (state_spec) and runs one step over a batch of tokens (forward). All
// step mechanics — batch building, slot mapping, padding, CUDA-graph recordings,
// the logits buffer — belong to engine::Runner, which hands the model a Step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/formats/model_config.h"
#include "corvid/kv/kv_store.h"
#include "corvid/kv/state_spec.h"
#include "corvid/ops/ops.h"

namespace corvid {

// Where one KV layer group (kv/kv_groups.h) of a step's store puts and reads keys
// and values. A contiguous store has one group whose slots are the positions.
struct StepKvGroup {
  // [n] the row of this group's storage each token's keys and values go to (negative:
  // padding, stored nowhere).
  ops::Indices slots;
  ops::PagedKV paged;  // a paged store: the group's block tables and each token's sequence
  // [n] each token's position as the group's attention sees it: the step's positions,
  // except in a group the delayed switch made (kv/kv_store.h KvSegment [begin, end)):
  // min(position, end - 1) - begin, negative where the group holds none of the
  // token's keys; the block tables then start at block begin / block_size.
  ops::Indices positions;
};

// What a step returns for its out_rows.
enum class StepOutput {
  Logits,  // F32 [rows, vocab]
  Hidden,  // F32 [rows, hidden_size]: the last layer's output after the final norm (embeddings)
};

// One forward step as the runner lays it out: n tokens from one or many sequences.
// The index arrays carry their device copy when the model is on a GPU (the runner
// uploads a step's inputs once).
struct Step {
  ops::Indices tokens;     // [n] token ids
  ops::Indices positions;  // [n] absolute position of each token in its sequence
  std::span<const StepKvGroup> groups;  // one per KV group of `kv` (a layer's: kv->group_of(layer))
  std::span<const int64_t> out_rows;    // the rows whose logits the step returns, in order
  const KvStore* kv = nullptr;          // on the model's device, allocated from its state_spec()
  StepOutput output = StepOutput::Logits;
  // An encoder's step (no KV state): where each sequence's tokens start in `tokens`, then
  // their end ([sequences + 1], host). Its attention stays inside each sequence.
  std::span<const int64_t> sequence_starts;
  const StepKvGroup& group(int64_t layer) const { return groups[static_cast<size_t>(kv->group_of(layer))]; }
};

class Model {
 public:
  virtual ~Model() = default;

  // The common description (vocab, sizes, context, bos/eos) the engine reads.
  virtual const ModelConfig& config() const = 0;
  virtual Device device() const = 0;
  // What each layer keeps per sequence; the KV stores are allocated from it.
  virtual const std::vector<LayerState>& state_spec() const = 0;

  // Runs the step: every token's keys and values go into step.kv at its slot, and
  // `logits` (F32, on the model's device) gets the rows asked for: [out_rows.size(), vocab]
  // logits, or for StepOutput::Hidden their final hidden states [out_rows.size(), hidden].
  // Scratch buffers grow as needed; buffers_generation() changes when they move (a
  // recorded step holds their addresses).
  virtual void forward(const Step& step, const Tensor& logits) = 0;
  virtual uint64_t buffers_generation() const = 0;

  // Bytes of weights one decode step reads (everything but the embedding table,
  // unless it doubles as the output matrix), for bandwidth figures.
  virtual int64_t weight_bytes_per_token() const = 0;
  virtual int64_t parameter_count() const = 0;
  // Parameters one token multiplies by: all but the experts a router leaves out (MoE).
  virtual int64_t active_parameter_count() const { return parameter_count(); }
  // Bytes of weights in pinned host memory its device reads in place (offloaded
  // experts, WeightPlacement); 0 when every weight is in the device's own memory.
  virtual int64_t host_mapped_weight_bytes() const { return 0; }
  // Bytes of each sparse layer's routed experts in layer order (empty for a dense
  // model): what --moe-offload N moves to host memory is the first N of them.
  virtual std::vector<int64_t> routed_expert_bytes() const { return {}; }
};

}  // namespace corvid
