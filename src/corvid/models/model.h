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

// One forward step as the runner lays it out: n tokens from one or many sequences.
struct Step {
  std::span<const int32_t> tokens;     // [n] token ids
  std::span<const int32_t> positions;  // [n] absolute position of each token in its sequence
  // [n] the KV row each token's keys and values go to (a negative row: padding, stored
  // nowhere). For a contiguous store these are the positions.
  std::span<const int32_t> slots;
  ops::PagedKV paged;                  // a paged store: block tables and each token's sequence
  std::span<const int64_t> out_rows;   // the rows whose logits the step returns, in order
  const KvStore* kv = nullptr;         // on the model's device, allocated from its state_spec()
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
  // logits [out_rows.size(), vocab] (F32, on the model's device) get the rows asked for.
  // Scratch buffers grow as needed; buffers_generation() changes when they move (a
  // recorded step holds their addresses).
  virtual void forward(const Step& step, const Tensor& logits) = 0;
  virtual uint64_t buffers_generation() const = 0;

  // Bytes of weights one decode step reads (everything but the embedding table,
  // unless it doubles as the output matrix), for bandwidth figures.
  virtual int64_t weight_bytes_per_token() const = 0;
  virtual int64_t parameter_count() const = 0;
};

}  // namespace corvid
