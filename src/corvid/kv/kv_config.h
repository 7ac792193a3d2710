// Per-layer KV formats (--kv-config FILE.json): rules that give layers a format of their
// own, e.g. keep the first and last two layers in f32 and the rest in q4, or give
// sliding-window layers another format than full ones.
//
//   {"rules": [{"layers": [0, 1, -2, -1], "format": "f32"},
//              {"kind": "sliding", "format": "q4"}]}
//
// Each storage layer takes the first rule that matches it: "layers" lists indices
// (negative ones count from the end), "kind" is "full" or "sliding", a rule with both
// needs both, and one with neither matches every layer. A layer no rule matches keeps
// the cache's dtype (--kv-cache-dtype); a format is any of kv/kv_format.h's names, turbo:kXvY included. Layers that share another's KV (Gemma 4) store
// nothing and take no format. Layers of one kind and format share a KV group.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corvid/kv/kv_format.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

// The format each layer of `spec` gets from the rules in `json` (the file's text);
// `source` names it in errors. Throws corvid::Error on a malformed file, an unknown
// format or kind, or a layer index outside the model.
std::vector<std::optional<KvFormat>> kv_layer_formats(const std::string& json, std::span<const LayerState> spec,
                                                   const std::string& source);

}  // namespace corvid
