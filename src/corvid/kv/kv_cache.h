// KVCache: keys and values of one sequence for every layer with storage (F32, or
// F16 / BF16 on a GPU: ops::attention's cache dtypes), laid out
// [capacity, kv_heads, head_dim] per layer (shapes from the model's state spec)
// so that ops::attention reads positions as rows. The contiguous store of
// Session and bench; the serving engine's paged BlockPool is the other KvStore.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/kv/kv_store.h"
#include "corvid/kv/layer_tensors.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

// The KV cache dtype a device gets unless asked otherwise: BF16 on CUDA (what vLLM
// keeps for a bf16 model: half the bytes decode attention reads, and no F16 overflow),
// F32 on the CPU (its attention kernels read F32 only).
DType default_kv_dtype(Device device);
// Throws unless a cache of `dtype` works on `device`.
void check_kv_dtype(DType dtype, Device device);
// Throws unless layer `layer`'s keys or values can be stored rotated (ops::hadamard_rotate:
// head_dim a power of 2), so that --kv-rotate and TurboQuant are refused before any request.
void check_rotation(int64_t head_dim, int64_t layer);

// The delayed switch (quant_start > 0): a full-attention layer of a coded format keeps
// positions [0, quant_start) in a head tensor of default_kv_dtype (rotated as its format
// is) and position p >= quant_start in row p - quant_start of its own. Its step groups
// (KvStore): 0 every other layer's (rows = positions), 1 the heads', 2 the coded tails'.
class KVCache final : public KvStore {
 public:
  // Zero-filled keys and values for `capacity` positions, on `device`, in `format`
  // (each layer in the spec's own format where it gives one).
  KVCache(std::span<const LayerState> spec, int64_t capacity, Device device = Device::CPU,
          const KvFormat& format = DType::F32, int64_t quant_start = 0);

  int64_t capacity() const { return capacity_; }
  Device device() const override { return device_; }
  const KvFormat& format() const { return format_; }
  const Tensor& keys(int64_t layer) const override { return layers_.keys(layer); }
  const Tensor& values(int64_t layer) const override { return layers_.values(layer); }
  int64_t num_layers() const override { return layers_.num_layers(); }
  bool paged() const override { return false; }
  KvFormat format(int64_t layer) const override { return layers_.format(layer); }
  int64_t num_groups() const override { return heads_ ? 3 : 1; }
  int64_t group_of(int64_t layer) const override { return split(layer) ? 2 : 0; }
  int64_t head_group_of(int64_t layer) const override { return split(layer) ? 1 : -1; }
  const Tensor& head_keys(int64_t layer) const override;
  const Tensor& head_values(int64_t layer) const override;
  KvFormat head_format(int64_t layer) const override;
  KvSegment segment(int64_t group) const override;
  int64_t quant_start() const { return quant_start_; }
  // Bytes held, for reporting.
  size_t nbytes() const;

 private:
  bool split(int64_t layer) const { return heads_ && split_[static_cast<size_t>(layer)]; }
  // The head tensors a split layer reads; throws for a layer that is not split.
  const LayerTensors& head_tensors(int64_t layer) const;

  int64_t capacity_;
  Device device_;
  KvFormat format_;
  int64_t quant_start_;
  LayerTensors layers_;
  std::vector<bool> split_;             // per layer: its head positions are kept apart
  std::unique_ptr<LayerTensors> heads_;  // [quant_start rows] per layer (split layers' read)
};

}  // namespace corvid
