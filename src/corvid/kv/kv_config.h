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
// the cache's dtype (--kv-cache-dtype). Layers that share another's KV (Gemma 4) store
// nothing and take no format. Layers of one kind and format share a KV group.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corvid/core/dtype.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

// The KV cache dtype a name gives (one of kv_format_names()); nothing for another name.
std::optional<DType> kv_dtype_from_name(const std::string& name);
// Every KV format's name: f32, f16, bf16, q8, q4, q8_g32, q4_g32, fp8.
const std::vector<std::string>& kv_format_names();

// The format each layer of `spec` gets from the rules in `json` (the file's text);
// `source` names it in errors. Throws corvid::Error on a malformed file, an unknown
// format or kind, or a layer index outside the model.
std::vector<std::optional<DType>> kv_layer_formats(const std::string& json, std::span<const LayerState> spec,
                                                   const std::string& source);

}  // namespace corvid
