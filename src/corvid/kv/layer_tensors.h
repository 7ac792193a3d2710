// LayerTensors: keys and values of every layer with storage, `rows` positions each
// ([rows, kv_heads, head_dim], keys and values in the layer's format: kv/kv_format.h),
// allocated from a state spec; a SharedKV layer's views are its source's. What KVCache
// and BlockPool both hold.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

class LayerTensors {
 public:
  // Each layer in its own format where the spec gives one, else in `store`.
  LayerTensors(std::span<const LayerState> spec, int64_t rows, Device device, const KvFormat& store);

  const Tensor& keys(int64_t layer) const { return keys_[index(layer)].tensor; }
  const Tensor& values(int64_t layer) const { return values_[index(layer)].tensor; }
  const KvFormat& format(int64_t layer) const { return formats_[index(layer)]; }
  int64_t num_layers() const { return static_cast<int64_t>(storage_.size()); }
  size_t nbytes() const;

 private:
  size_t index(int64_t layer) const { return static_cast<size_t>(storage_[static_cast<size_t>(layer)]); }

  std::vector<int64_t> storage_;  // per layer: its index into keys_/values_ (shared layers: the source's)
  std::vector<DeviceTensor> keys_, values_;
  std::vector<KvFormat> formats_;
};

}  // namespace corvid
