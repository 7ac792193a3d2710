#include "corvid/kv/layer_tensors.h"

#include "corvid/core/error.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/ops/ops.h"

namespace corvid {

LayerTensors::LayerTensors(std::span<const LayerState> spec, int64_t rows, Device device, const KvFormat& store) {
  check_state_spec(spec);
  for (const LayerState& s : spec) {
    if (s.kind == StateKind::SharedKV) {
      storage_.push_back(storage_[static_cast<size_t>(s.source)]);
      continue;
    }
    // The layer's own format where it has one. A coded format groups values within one head.
    const KvFormat f = s.format_in(store);
    for (const DType t : {f.keys, f.values}) {
      check_kv_dtype(t, device);
      CORVID_CHECK(s.head_dim % dtype_info(t).block_elems == 0, "kv cache: a ", dtype_name(t), " cache needs ",
                   "head_dim a multiple of ", dtype_info(t).block_elems, "; this model's is ", s.head_dim);
    }
    CORVID_CHECK(ops::kv_cache_pair_supported(f.keys, f.values, device), "kv cache: keys of ", dtype_name(f.keys),
                 " with values of ", dtype_name(f.values), " are not available on ", device_name(device));
    if (f.rotated()) check_rotation(s.head_dim, static_cast<int64_t>(storage_.size()));
    storage_.push_back(static_cast<int64_t>(keys_.size()));
    keys_.emplace_back(device, f.keys, std::initializer_list<int64_t>{rows, s.kv_heads, s.head_dim});
    values_.emplace_back(device, f.values, std::initializer_list<int64_t>{rows, s.kv_heads, s.head_dim});
    formats_.push_back(f);
  }
}

size_t LayerTensors::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].tensor.nbytes() + values_[l].tensor.nbytes();
  return total;
}

}  // namespace corvid
