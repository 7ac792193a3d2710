#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

DType default_kv_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

void check_kv_dtype(DType dtype, Device device) {
  CORVID_CHECK(ops::kv_cache_dtype_supported(dtype, device), "kv cache: ", dtype_name(dtype), " on ",
               device_name(device), " is not supported (F32 everywhere, F16 or BF16 on CUDA)");
}

KVCache::KVCache(const ModelConfig& config, int64_t capacity, Device device, DType dtype)
    : capacity_(capacity), device_(device), dtype_(dtype) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  check_kv_dtype(dtype, device);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    keys_.emplace_back(device, dtype, std::initializer_list<int64_t>{capacity, config.num_key_value_heads, config.head_dim});
    values_.emplace_back(device, dtype, std::initializer_list<int64_t>{capacity, config.num_key_value_heads, config.head_dim});
  }
}

size_t KVCache::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].tensor.nbytes() + values_[l].tensor.nbytes();
  return total;
}

}  // namespace corvid
