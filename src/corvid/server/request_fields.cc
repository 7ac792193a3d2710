#include "corvid/server/request_fields.h"

#include <cmath>
#include <sstream>

namespace corvid::server {

void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

void too_many(const char* field, size_t count, size_t limit, const char* what) {
  bad(field, std::string("'") + field + "' has " + std::to_string(count) + " " + what + "; at most " +
                 std::to_string(limit) + " are allowed");
}

void only_fields(const Json& object, std::initializer_list<const char*> known, const std::string& where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) {
      const std::string name = where.empty() ? it.key() : where + "." + it.key();
      bad(name, "unknown field '" + name + "' (corvid does not support it)");
    }
  }
}

std::string type_of(const Json& object, const std::string& where) {
  if (!object.is_object()) bad(where, where + " must be an object");
  const Json* type = field(object, "type");
  if (!type || !type->is_string()) bad(where + ".type", where + " needs a 'type' string");
  return type->get<std::string>();
}

const std::string& required_string(const Json& object, const char* key, const std::string& where) {
  const Json* v = field(object, key);
  if (!v || !v->is_string()) bad(where + "." + key, where + " needs a '" + key + "' string");
  return v->get_ref<const std::string&>();
}

ThinkingProblem thinking_problem(std::optional<bool> enable_thinking, bool budget, bool template_has_switch,
                                 bool template_reasons) {
  if (enable_thinking && !template_has_switch) {
    if (*enable_thinking && !template_reasons) return ThinkingProblem::kCannotEnable;
    if (!*enable_thinking && template_reasons) return ThinkingProblem::kCannotDisable;
  }
  if (budget && !template_reasons) return ThinkingProblem::kBudgetUnreadable;
  return ThinkingProblem::kNone;
}

void check_tool_list(const Json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  if (tools.size() > kMaxTools) too_many("tools", tools.size(), kMaxTools, "tools");
}

const Json* field(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {
std::string name_of(const char* key, const std::string& where) { return where.empty() ? key : where + "." + key; }
}  // namespace

std::optional<double> number(const Json& body, const char* key, double lo, double hi, const std::string& where) {
  const Json* v = field(body, key);
  if (!v) return std::nullopt;
  const std::string name = name_of(key, where);
  if (!v->is_number()) bad(name, "'" + name + "' must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream m;
    m << "'" << name << "' must be in [" << lo << ", " << hi << "], got " << x;
    bad(name, m.str());
  }
  return x;
}

std::optional<int64_t> integer(const Json& body, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  const Json* v = field(body, key);
  if (!v) return std::nullopt;
  const std::string name = name_of(key, where);
  if (!v->is_number_integer()) bad(name, "'" + name + "' must be an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : v->get<int64_t>();
  if (x < lo || x > hi)
    bad(name, "'" + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                 v->dump());
  return x;
}

std::optional<bool> boolean(const Json& body, const char* key, const std::string& where) {
  const Json* v = field(body, key);
  if (!v) return std::nullopt;
  const std::string name = name_of(key, where);
  if (!v->is_boolean()) bad(name, "'" + name + "' must be true or false");
  return v->get<bool>();
}

std::optional<std::string> string_field(const Json& body, const char* key, const std::string& where) {
  const Json* v = field(body, key);
  if (!v) return std::nullopt;
  const std::string name = name_of(key, where);
  if (!v->is_string()) bad(name, "'" + name + "' must be a string");
  return v->get<std::string>();
}

std::vector<std::string> stop_strings(const Json& value, const char* param, bool one_allowed) {
  const std::string shape = one_allowed ? "a string or a list of strings" : "a list of strings";
  if (one_allowed && value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.size() > kMaxStopBytes)
      bad(param, std::string("'") + param + "' has " + std::to_string(s.size()) + " bytes; at most " +
                     std::to_string(kMaxStopBytes) + " are allowed");
    if (s.empty()) return {};
    return {s};
  }
  if (!value.is_array()) bad(param, std::string("'") + param + "' must be " + shape);
  if (value.size() > kMaxStopStrings) too_many(param, value.size(), kMaxStopStrings, "strings");
  std::vector<std::string> out;
  size_t bytes = 0;
  for (const Json& s : value) {
    if (!s.is_string()) bad(param, std::string("'") + param + "' must be " + shape);
    bytes += s.get_ref<const std::string&>().size();
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  if (bytes > kMaxStopBytes)
    bad(param, std::string("'") + param + "' strings have " + std::to_string(bytes) + " bytes in all; at most " +
                   std::to_string(kMaxStopBytes) + " are allowed");
  return out;
}

void append_text(std::string& text, const std::string& part) { text += (text.empty() ? "" : "\n") + part; }

}  // namespace corvid::server
