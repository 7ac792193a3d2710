#include "corvid/kv/kv_cache.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {

DType default_kv_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

void check_kv_dtype(DType dtype, Device device) {
  CORVID_CHECK(ops::kv_cache_dtype_supported(dtype, device), "kv cache: ", dtype_name(dtype), " on ",
               device_name(device), " is not supported (F32 and the coded q8/q4/fp8 formats everywhere, F16 or BF16 on CUDA)");
}

void check_rotation(int64_t head_dim, int64_t layer) {
  CORVID_CHECK(head_dim > 0 && (head_dim & (head_dim - 1)) == 0,
               "kv cache: a rotated cache (--kv-rotate, turbo:kXvY) needs head_dim a power of 2; layer ", layer,
               " has ", head_dim);
}

// The checks before any allocation (a member initializer runs them first).
static std::span<const LayerState> checked(std::span<const LayerState> spec, int64_t capacity, Device device,
                                           const KvFormat& format) {
  CORVID_CHECK(capacity > 0, "kv cache: capacity must be positive");
  check_kv_dtype(format.keys, device);
  check_kv_dtype(format.values, device);
  return spec;
}

KVCache::KVCache(std::span<const LayerState> spec, int64_t capacity, Device device, const KvFormat& format)
    : capacity_(capacity),
      device_(device),
      format_(format),
      layers_(checked(spec, capacity, device, format), capacity, device, format) {}

size_t KVCache::nbytes() const { return layers_.nbytes(); }

}  // namespace corvid
