// What one layer of a model keeps per sequence, as the model declares it
// (Model::state_spec): the KV stores (kv/kv_cache.h, kv/block_pool.h) allocate
// from this list and never from a model's config, so a family with its own
// layer kinds needs no change here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "corvid/kv/kv_format.h"

namespace corvid {

enum class StateKind {
  FullKV,     // keys and values of every position
  SlidingKV,  // keys and values; attention reads only the last `window` positions
  SharedKV,   // no storage: reads the K/V of layer `source` (Gemma 4's KV-shared layers)
};

struct LayerState {
  StateKind kind = StateKind::FullKV;
  int64_t kv_heads = 0, head_dim = 0;
  int64_t window = 0;   // SlidingKV: positions visible to a query, itself included
  int64_t source = -1;  // SharedKV: the layer whose keys and values it reads
  // The layer's KV format (kv/kv_config.h: per-layer formats); unset: the store's.
  std::optional<KvFormat> format = std::nullopt;
  KvFormat format_in(const KvFormat& store) const { return format.value_or(store); }
};

// Checks a spec (positive shapes, sources that are earlier layers with storage);
// throws corvid::Error naming the layer.
void check_state_spec(std::span<const LayerState> spec);

// Elements of keys plus values one position takes over all layers with storage.
int64_t kv_elements_per_position(std::span<const LayerState> spec);
// Their bytes, each layer in its format (`store` where it names none).
int64_t kv_bytes_per_position(std::span<const LayerState> spec, const KvFormat& store);
// `spec` with layer l's format set to formats[l] where that is set (formats empty: the
// spec as it is; otherwise one entry per layer).
std::vector<LayerState> with_layer_formats(std::span<const LayerState> spec,
                                           std::span<const std::optional<KvFormat>> formats);

// Every one of `layers` layers FullKV with the same heads (a plain decoder).
std::vector<LayerState> uniform_kv_spec(int64_t layers, int64_t kv_heads, int64_t head_dim);

// The layer whose storage `layer` reads: itself, or its SharedKV source.
inline int64_t storage_layer(std::span<const LayerState> spec, int64_t layer) {
  const LayerState& s = spec[static_cast<size_t>(layer)];
  return s.kind == StateKind::SharedKV ? s.source : layer;
}

}  // namespace corvid
