#include "corvid/kv/state_spec.h"

#include "corvid/core/error.h"

namespace corvid {

void check_state_spec(std::span<const LayerState> spec) {
  // An encoder (BERT) keeps nothing per sequence: it embeds, it does not generate.
  CORVID_CHECK(!spec.empty(), "the model keeps no state per sequence: an encoder gives embeddings, not text "
                              "(corvid embed, corvid serve --task embed)");
  for (size_t l = 0; l < spec.size(); ++l) {
    const LayerState& s = spec[l];
    if (s.kind == StateKind::SharedKV) {
      CORVID_CHECK(s.source >= 0 && static_cast<size_t>(s.source) < l &&
                       spec[static_cast<size_t>(s.source)].kind != StateKind::SharedKV,
                   "kv: layer ", l, " shares the KV of layer ", s.source, ", which is not an earlier layer with its own");
      const LayerState& src = spec[static_cast<size_t>(s.source)];
      CORVID_CHECK(src.kv_heads == s.kv_heads && src.head_dim == s.head_dim, "kv: layer ", l,
                   " shares the KV of layer ", s.source, " but has another head shape");
      continue;
    }
    CORVID_CHECK(s.kv_heads > 0 && s.head_dim > 0, "kv: layer ", l, " has kv_heads ", s.kv_heads, " and head_dim ",
                 s.head_dim);
    CORVID_CHECK(s.kind != StateKind::SlidingKV || s.window > 0, "kv: sliding layer ", l, " has window ", s.window);
  }
}

int64_t kv_elements_per_position(std::span<const LayerState> spec) {
  int64_t total = 0;
  for (const LayerState& s : spec)
    if (s.kind != StateKind::SharedKV) total += 2 * s.kv_heads * s.head_dim;
  return total;
}

int64_t kv_bytes_per_position(std::span<const LayerState> spec, const KvFormat& store) {
  int64_t total = 0;
  for (const LayerState& s : spec)
    if (s.kind != StateKind::SharedKV) total += s.format_in(store).bytes_per_position(s.kv_heads * s.head_dim);
  return total;
}

std::vector<LayerState> with_layer_formats(std::span<const LayerState> spec,
                                           std::span<const std::optional<KvFormat>> formats) {
  std::vector<LayerState> out(spec.begin(), spec.end());
  if (formats.empty()) return out;
  CORVID_CHECK(formats.size() == spec.size(), "kv: ", formats.size(), " layer formats for a model of ", spec.size(),
               " layers");
  for (size_t l = 0; l < out.size(); ++l)
    if (formats[l]) out[l].format = formats[l];
  return out;
}

std::vector<LayerState> uniform_kv_spec(int64_t layers, int64_t kv_heads, int64_t head_dim) {
  return std::vector<LayerState>(static_cast<size_t>(layers), LayerState{StateKind::FullKV, kv_heads, head_dim});
}

}  // namespace corvid
