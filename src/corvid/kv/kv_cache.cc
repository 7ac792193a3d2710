#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

DType default_kv_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

void check_kv_dtype(DType dtype, Device device) {
  CORVID_CHECK(ops::kv_cache_dtype_supported(dtype, device), "kv cache: ", dtype_name(dtype), " on ",
               device_name(device), " is not supported (F32 everywhere, F16 or BF16 on CUDA, q8/q4 on the CPU)");
}

// The checks before any allocation (a member initializer runs them first).
static std::span<const LayerState> checked(std::span<const LayerState> spec, int64_t capacity, Device device,
                                           DType dtype) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  check_kv_dtype(dtype, device);
  return spec;
}

KVCache::KVCache(std::span<const LayerState> spec, int64_t capacity, Device device, DType dtype, bool rotate_keys)
    : capacity_(capacity),
      device_(device),
      dtype_(dtype),
      rotate_keys_(rotate_keys),
      layers_(checked(spec, capacity, device, dtype), capacity, device, dtype) {}

size_t KVCache::nbytes() const { return layers_.nbytes(); }

}  // namespace corvid
