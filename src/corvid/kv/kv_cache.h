// KVCache: keys and values of one sequence for every layer (F32, or F16 / BF16 on a
// GPU: ops::attention's cache dtypes), laid out
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

// The KV cache dtype a device gets unless asked otherwise: BF16 on CUDA (what vLLM
// keeps for a bf16 model: half the bytes decode attention reads, and no F16 overflow),
// F32 on the CPU (its attention kernels read F32 only).
DType default_kv_dtype(Device device);
// Throws unless a cache of `dtype` works on `device`.
void check_kv_dtype(DType dtype, Device device);

class KVCache {
 public:
  // Zero-filled keys and values for `capacity` positions, on `device`, in `dtype`.
  KVCache(const ModelConfig& config, int64_t capacity, Device device = Device::CPU, DType dtype = DType::F32);

  int64_t capacity() const { return capacity_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  const Tensor& keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)].tensor; }
  const Tensor& values(int64_t layer) const { return values_[static_cast<size_t>(layer)].tensor; }
  // Bytes held, for reporting.
  size_t nbytes() const;

 private:
  int64_t capacity_;
  Device device_;
  DType dtype_;
  std::vector<DeviceTensor> keys_, values_;
};

}  // namespace corvid
