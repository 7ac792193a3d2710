// KV layer groups: the layers of a state spec that share one block table. Full
// attention layers form one group; sliding-window layers one group per window
// size; layers given a format of their own (kv/kv_config.h) a group per (kind,
// window, format); a SharedKV layer belongs to its source's group and stores nothing. Groups
// come out full first, then sliding by window, each listing its storage layers in
// model order. Recurrent and cross-attention state will be groups of their own
// kinds (slots per sequence rather than blocks).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corvid/kv/kv_store.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

struct KvGroup {
  StateKind kind = StateKind::FullKV;  // FullKV or SlidingKV
  int64_t window = 0;                  // SlidingKV: positions a query sees, itself included
  std::vector<int64_t> layers;         // its storage layers (model indices)
  std::vector<LayerState> spec;        // their states, in the same order
  std::optional<KvFormat> format;      // their format (kv/kv_config.h); unset: the pool's
  KvSegment segment;                   // the positions it keeps (the delayed switch splits a group)
  // "full", "sliding 512", "full q4", "full turbo:k4v3", "full bf16 below 256", "full q8 from 256"
  std::string name() const;
};

struct KvGrouping {
  std::vector<KvGroup> groups;
  std::vector<int64_t> group_of;  // per model layer (a SharedKV layer: its source's group)
  std::vector<int64_t> index_of;  // per model layer: its (or its source's) index in the group
};

// Throws corvid::Error (check_state_spec) on an invalid spec.
KvGrouping group_layers(std::span<const LayerState> spec);

}  // namespace corvid
