#include "corvid/kv/layer_tensors.h"

#include "corvid/core/error.h"
#include "corvid/kv/kv_cache.h"

namespace corvid {

LayerTensors::LayerTensors(std::span<const LayerState> spec, int64_t rows, Device device, DType dtype) {
  check_state_spec(spec);
  for (const LayerState& s : spec) {
    if (s.kind == StateKind::SharedKV) {
      storage_.push_back(storage_[static_cast<size_t>(s.source)]);
      continue;
    }
    // The layer's own format where it has one. A block format (the affine KV formats)
    // groups values within one head.
    const DType t = s.format(dtype);
    check_kv_dtype(t, device);
    CORVID_CHECK(s.head_dim % dtype_info(t).block_elems == 0, "kv cache: a ", dtype_name(t), " cache needs ",
                 "head_dim a multiple of ", dtype_info(t).block_elems, "; this model's is ", s.head_dim);
    storage_.push_back(static_cast<int64_t>(keys_.size()));
    keys_.emplace_back(device, t, std::initializer_list<int64_t>{rows, s.kv_heads, s.head_dim});
    values_.emplace_back(device, t, std::initializer_list<int64_t>{rows, s.kv_heads, s.head_dim});
  }
}

size_t LayerTensors::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].tensor.nbytes() + values_[l].tensor.nbytes();
  return total;
}

}  // namespace corvid
