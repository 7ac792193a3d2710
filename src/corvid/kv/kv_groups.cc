#include "corvid/kv/kv_groups.h"

#include <algorithm>

namespace corvid {

std::string KvGroup::name() const {
  const std::string base = kind == StateKind::SlidingKV ? "sliding " + std::to_string(window) : "full";
  std::string name = format ? base + " " + kv_format_name(*format) : base;
  if (segment.end != INT64_MAX) name += " below " + std::to_string(segment.end);
  if (segment.begin > 0) name += " from " + std::to_string(segment.begin);
  return name;
}

KvGrouping group_layers(std::span<const LayerState> spec) {
  check_state_spec(spec);
  KvGrouping g;
  // The group a storage layer of this kind and window joins (made on first sight).
  // Layers of one kind, window and format share a group (and so its blocks).
  auto group_for = [&g](const LayerState& s) {
    const int64_t window = s.kind == StateKind::SlidingKV ? s.window : 0;
    for (size_t i = 0; i < g.groups.size(); ++i)
      if (g.groups[i].kind == s.kind && g.groups[i].window == window && g.groups[i].format == s.format) return i;
    g.groups.push_back({s.kind, window, {}, {}, s.format, {}});
    return g.groups.size() - 1;
  };
  std::vector<size_t> raw_group(spec.size());
  for (size_t l = 0; l < spec.size(); ++l)
    if (spec[l].kind != StateKind::SharedKV) raw_group[l] = group_for(spec[l]);
  // Full first, then sliding by window (a stable order for stats and tests).
  std::vector<size_t> order(g.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&g](size_t a, size_t b) {
    const KvGroup &x = g.groups[a], &y = g.groups[b];
    if ((x.kind == StateKind::SlidingKV) != (y.kind == StateKind::SlidingKV)) return x.kind != StateKind::SlidingKV;
    return x.window < y.window;
  });
  std::vector<KvGroup> sorted;
  std::vector<int64_t> rank(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = static_cast<int64_t>(i);
    sorted.push_back(g.groups[order[i]]);
  }
  g.groups = std::move(sorted);
  g.group_of.assign(spec.size(), 0);
  g.index_of.assign(spec.size(), 0);
  for (size_t l = 0; l < spec.size(); ++l) {
    if (spec[l].kind == StateKind::SharedKV) {
      const size_t src = static_cast<size_t>(spec[l].source);  // an earlier storage layer (checked)
      g.group_of[l] = g.group_of[src];
      g.index_of[l] = g.index_of[src];
      continue;
    }
    KvGroup& group = g.groups[static_cast<size_t>(rank[raw_group[l]])];
    g.group_of[l] = rank[raw_group[l]];
    g.index_of[l] = static_cast<int64_t>(group.layers.size());
    group.layers.push_back(static_cast<int64_t>(l));
    group.spec.push_back(spec[l]);
  }
  return g;
}

}  // namespace corvid
