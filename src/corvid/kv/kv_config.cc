#include "corvid/kv/kv_config.h"

#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid {

namespace {

struct Rule {
  std::vector<int64_t> layers;  // resolved to model indices; empty: any
  std::optional<StateKind> kind;
  KvFormat format;
};

Rule parse_rule(const nlohmann::json& r, size_t index, int64_t n_layers, const std::string& source) {
  const std::string where = source + ": rule " + std::to_string(index);
  CORVID_CHECK(r.is_object(), where, " is not an object");
  for (const auto& [key, value] : r.items())
    CORVID_CHECK(key == "layers" || key == "kind" || key == "format", where, ": unknown key \"", key,
                 "\" (layers, kind, format)");
  Rule rule{};
  CORVID_CHECK(r.contains("format") && r["format"].is_string(), where, " needs a \"format\" name");
  const std::string name = r["format"].get<std::string>();
  const std::optional<KvFormat> t = kv_format_from_name(name);
  CORVID_CHECK(t.has_value(), where, ": unknown format \"", name, "\" (f32, f16, bf16, q8, q4, q8_g32, q4_g32, fp8, turbo:kXvY)");
  rule.format = *t;
  if (r.contains("kind")) {
    CORVID_CHECK(r["kind"].is_string(), where, ": \"kind\" must be \"full\" or \"sliding\"");
    const std::string kind = r["kind"].get<std::string>();
    CORVID_CHECK(kind == "full" || kind == "sliding", where, ": unknown kind \"", kind, "\" (full, sliding)");
    rule.kind = kind == "full" ? StateKind::FullKV : StateKind::SlidingKV;
  }
  if (r.contains("layers")) {
    CORVID_CHECK(r["layers"].is_array() && !r["layers"].empty(), where, ": \"layers\" must be a list of indices");
    for (const nlohmann::json& l : r["layers"]) {
      CORVID_CHECK(l.is_number_integer(), where, ": layer ", l.dump(), " is not an index");
      const int64_t i = l.get<int64_t>(), resolved = i < 0 ? n_layers + i : i;
      CORVID_CHECK(resolved >= 0 && resolved < n_layers, where, ": layer ", i, " is outside the model's ", n_layers,
                   " layers");
      rule.layers.push_back(resolved);
    }
  }
  return rule;
}

}  // namespace

std::vector<std::optional<KvFormat>> kv_layer_formats(const std::string& json, std::span<const LayerState> spec,
                                                   const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": not JSON: ", e.what());
  }
  CORVID_CHECK(doc.is_object() && doc.contains("rules") && doc["rules"].is_array(), source,
               ": a KV config is {\"rules\": [{\"layers\": [...], \"kind\": \"full\" | \"sliding\", \"format\": ...}]}");
  for (const auto& [key, value] : doc.items())
    CORVID_CHECK(key == "rules", source, ": unknown key \"", key, "\"");
  const auto n_layers = static_cast<int64_t>(spec.size());
  std::vector<Rule> rules;
  for (size_t i = 0; i < doc["rules"].size(); ++i) rules.push_back(parse_rule(doc["rules"][i], i, n_layers, source));
  std::vector<std::optional<KvFormat>> formats(spec.size());
  for (size_t l = 0; l < spec.size(); ++l) {
    if (spec[l].kind == StateKind::SharedKV) continue;
    for (const Rule& r : rules) {
      const bool layer_ok =
          r.layers.empty() || std::find(r.layers.begin(), r.layers.end(), static_cast<int64_t>(l)) != r.layers.end();
      const bool kind_ok = !r.kind || *r.kind == spec[l].kind;
      if (layer_ok && kind_ok) {
        formats[l] = r.format;
        break;
      }
    }
  }
  return formats;
}

}  // namespace corvid
