#include "corvid/kv/kv_cache.h"

#include <algorithm>

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

KVCache::KVCache(std::span<const LayerState> spec, int64_t capacity, Device device, const KvFormat& format,
                 int64_t quant_start)
    : capacity_(capacity),
      device_(device),
      format_(format),
      quant_start_(quant_start),
      layers_(checked(spec, capacity, device, format), capacity, device, format) {
  CORVID_CHECK(quant_start >= 0, "kv cache: --kv-quant-start must not be negative, got ", quant_start);
  if (quant_start == 0) return;
  // Layers split as the KV manager splits them: full attention in a coded format. Their
  // heads take default_kv_dtype; every other layer keeps its format in the head tensors
  // too (rows nobody reads: a spec has one format per layer).
  std::vector<LayerState> head_spec(spec.begin(), spec.end());
  bool any = false;
  for (size_t l = 0; l < spec.size(); ++l) {
    const LayerState& s = spec[l];
    const LayerState& own = s.kind == StateKind::SharedKV ? spec[static_cast<size_t>(s.source)] : s;
    const KvFormat f = own.format_in(format);
    const bool split = own.kind == StateKind::FullKV && kv_format_coded(f);
    split_.push_back(split);
    any |= split;
    if (split && s.kind != StateKind::SharedKV) head_spec[l].format = kv_head_format(f, default_kv_dtype(device));
  }
  if (any) heads_ = std::make_unique<LayerTensors>(head_spec, std::min(quant_start, capacity), device, format);
}

const LayerTensors& KVCache::head_tensors(int64_t layer) const {
  CORVID_CHECK(split(layer), "kv cache: layer ", layer, " keeps no head positions apart");
  return *heads_;
}

const Tensor& KVCache::head_keys(int64_t layer) const { return head_tensors(layer).keys(layer); }
const Tensor& KVCache::head_values(int64_t layer) const { return head_tensors(layer).values(layer); }
KvFormat KVCache::head_format(int64_t layer) const { return head_tensors(layer).format(layer); }

KvSegment KVCache::segment(int64_t group) const {
  if (group == 1) return {0, quant_start_};
  if (group == 2) return {quant_start_, INT64_MAX};
  return {};
}

size_t KVCache::nbytes() const { return layers_.nbytes() + (heads_ ? heads_->nbytes() : 0); }

}  // namespace corvid
