#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

DType default_kv_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

void check_kv_dtype(DType dtype, Device device) {
  CORVID_CHECK(ops::kv_cache_dtype_supported(dtype, device), "kv cache: ", dtype_name(dtype), " on ",
               device_name(device), " is not supported (F32 and the coded q8/q4/fp8 formats everywhere, F16 or BF16 on CUDA)");
}

void check_key_rotation(std::span<const LayerState> spec) {
  for (size_t l = 0; l < spec.size(); ++l) {
    const int64_t d = spec[l].head_dim;
    CORVID_CHECK(d > 0 && (d & (d - 1)) == 0, "kv cache: rotated keys (--kv-rotate) need head_dim a power of 2; layer ",
                 l, " has ", d);
  }
}

// The checks before any allocation (a member initializer runs them first).
static std::span<const LayerState> checked(std::span<const LayerState> spec, int64_t capacity, Device device,
                                           DType dtype, bool rotate_keys) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  check_kv_dtype(dtype, device);
  if (rotate_keys) check_key_rotation(spec);
  return spec;
}

KVCache::KVCache(std::span<const LayerState> spec, int64_t capacity, Device device, DType dtype, bool rotate_keys)
    : capacity_(capacity),
      device_(device),
      dtype_(dtype),
      rotate_keys_(rotate_keys),
      layers_(checked(spec, capacity, device, dtype, rotate_keys), capacity, device, dtype) {}

size_t KVCache::nbytes() const { return layers_.nbytes(); }

}  // namespace corvid
