// LayerTensors: keys and values of every layer with storage, `rows` positions each
// ([rows, kv_heads, head_dim] in one dtype), allocated from a state spec; a SharedKV
// layer's views are its source's. What KVCache and BlockPool both hold.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

class LayerTensors {
 public:
  LayerTensors(std::span<const LayerState> spec, int64_t rows, Device device, DType dtype);

  const Tensor& keys(int64_t layer) const { return keys_[index(layer)].tensor; }
  const Tensor& values(int64_t layer) const { return values_[index(layer)].tensor; }
  int64_t num_layers() const { return static_cast<int64_t>(storage_.size()); }
  size_t nbytes() const;

 private:
  size_t index(int64_t layer) const { return static_cast<size_t>(storage_[static_cast<size_t>(layer)]); }

  std::vector<int64_t> storage_;  // per layer: its index into keys_/values_ (shared layers: the source's)
  std::vector<DeviceTensor> keys_, values_;
};

}  // namespace corvid
