// KVCache: keys and values of one sequence for every layer, F32, laid out
// [capacity, n_kv_heads, head_dim] per layer so that ops::attention reads
// positions as rows. This is the contiguous single-sequence cache of the
// foundation; the paged block pool of the serving engine replaces it behind
// the same "rows by position" view.
#pragma once

#include <cstdint>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/formats/model_config.h"

namespace corvid {

class KVCache {
 public:
  // Zero-filled keys and values for `capacity` positions, on `device`.
  KVCache(const ModelConfig& config, int64_t capacity, Device device = Device::CPU);

  int64_t capacity() const { return capacity_; }
  Device device() const { return device_; }
  const Tensor& keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)].tensor; }
  const Tensor& values(int64_t layer) const { return values_[static_cast<size_t>(layer)].tensor; }
  // Bytes held, for reporting.
  size_t nbytes() const;

 private:
  int64_t capacity_;
  Device device_;
  std::vector<DeviceTensor> keys_, values_;
};

}  // namespace corvid
