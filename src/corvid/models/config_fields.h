// Typed reads of the config.json fields only one family knows (the shared ones go
// through formats/model_config.h). A null value counts as absent, as transformers
// treats it; a value of the wrong type is an error naming the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid::config_fields {

inline const nlohmann::json* find(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline double number(const nlohmann::json& j, const char* key, double fallback, const std::string& source) {
  const nlohmann::json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_number()) fail(source, ": field ", key, " must be a number");
  return v->get<double>();
}

inline bool boolean(const nlohmann::json& j, const char* key, bool fallback, const std::string& source) {
  const nlohmann::json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(source, ": field ", key, " must be a bool");
  return v->get<bool>();
}

inline std::optional<int64_t> integer(const nlohmann::json& j, const char* key, const std::string& source) {
  const nlohmann::json* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) fail(source, ": field ", key, " must be an integer");
  return v->get<int64_t>();
}

// A list of integers of exactly `count` entries, or nothing when absent.
inline std::optional<std::vector<int64_t>> integers(const nlohmann::json& j, const char* key, int64_t count,
                                                    const std::string& source) {
  const nlohmann::json* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) fail(source, ": field ", key, " must be a list of integers");
  std::vector<int64_t> out;
  for (const nlohmann::json& e : *v) {
    if (!e.is_number_integer()) fail(source, ": field ", key, " must be a list of integers");
    out.push_back(e.get<int64_t>());
  }
  if (static_cast<int64_t>(out.size()) != count)
    fail(source, ": field ", key, " has ", out.size(), " entries for ", count, " layers");
  return out;
}

}  // namespace corvid::config_fields
