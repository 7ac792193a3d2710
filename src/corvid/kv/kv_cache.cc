#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

DType default_kv_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

void check_kv_dtype(DType dtype, Device device) {
  CORVID_CHECK(ops::kv_cache_dtype_supported(dtype, device), "kv cache: ", dtype_name(dtype), " on ",
               device_name(device), " is not supported (F32 everywhere, F16 or BF16 on CUDA)");
}

KVCache::KVCache(std::span<const LayerState> spec, int64_t capacity, Device device, DType dtype)
    : capacity_(capacity), device_(device), dtype_(dtype) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  check_kv_dtype(dtype, device);
  check_state_spec(spec);
  for (int64_t l = 0; l < static_cast<int64_t>(spec.size()); ++l) {
    const LayerState& s = spec[static_cast<size_t>(l)];
    if (s.kind == StateKind::SharedKV) {
      storage_.push_back(storage_[static_cast<size_t>(s.source)]);
      continue;
    }
    storage_.push_back(static_cast<int64_t>(keys_.size()));
    keys_.emplace_back(device, dtype, std::initializer_list<int64_t>{capacity, s.kv_heads, s.head_dim});
    values_.emplace_back(device, dtype, std::initializer_list<int64_t>{capacity, s.kv_heads, s.head_dim});
  }
}

size_t KVCache::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].tensor.nbytes() + values_[l].tensor.nbytes();
  return total;
}

}  // namespace corvid
