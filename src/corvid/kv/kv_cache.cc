#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"

namespace corvid {

KVCache::KVCache(const ModelConfig& config, int64_t capacity, Device device) : capacity_(capacity), device_(device) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    keys_.emplace_back(device, DType::F32, std::initializer_list<int64_t>{capacity, config.num_key_value_heads, config.head_dim});
    values_.emplace_back(device, DType::F32, std::initializer_list<int64_t>{capacity, config.num_key_value_heads, config.head_dim});
  }
}

size_t KVCache::nbytes() const {
  size_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) total += keys_[l].tensor.nbytes() + values_[l].tensor.nbytes();
  return total;
}

}  // namespace corvid
