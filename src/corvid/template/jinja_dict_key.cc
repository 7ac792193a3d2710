// Dict keys as Object stores them (jinja_value.h dict_key): strings as themselves, None,
// bool, int and float in a typed form that keeps Python's equal keys together.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "corvid/template/jinja_value.h"

namespace corvid::jinja {

namespace {
constexpr char kTypedKey = '\xff';
std::string typed_key(char type, const std::string& text) { return std::string{kTypedKey, type} + text; }
}  // namespace

std::string dict_key(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::String:
      return key.as_string().empty() || key.as_string()[0] != kTypedKey ? key.as_string() : typed_key('s', key.as_string());
    case Value::Kind::None: return typed_key('n', "None");
    case Value::Kind::Bool: return typed_key('b', key.as_bool() ? "1" : "0");
    case Value::Kind::Int: return typed_key('i', std::to_string(key.as_int()));
    case Value::Kind::Float: {
      const double d = key.as_float();
      // An integral float is the int it equals (Python: hash(2.0) == hash(2), 2.0 == 2).
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18)
        return typed_key('f', std::to_string(static_cast<std::int64_t>(d)));
      return typed_key('f', python_float_repr(d));
    }
    default: fail("unhashable type: '", key.type_name(), "'");
  }
}

Value dict_key_value(const std::string& stored) {
  if (is_string_key(stored)) return Value(stored.empty() || stored[0] != kTypedKey ? stored : stored.substr(2));
  const std::string text = stored.substr(2);
  switch (stored[1]) {
    case 'n': return Value::none();
    case 'b': return Value(text == "1");
    case 'i': return Value(static_cast<std::int64_t>(std::stoll(text)));
    default: return Value(std::strtod(text.c_str(), nullptr));  // "inf", "-inf", "nan" too
  }
}

std::string dict_key_json_text(const std::string& stored) {
  if (is_string_key(stored)) return dict_key_value(stored).as_string();
  const Value k = dict_key_value(stored);
  switch (k.kind()) {  // what Python's json.dumps makes of such a key
    case Value::Kind::None: return "null";
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::Float: return python_float_repr(k.as_float());
    default: return k.repr();
  }
}

bool dict_key_less(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& k) { return is_string_key(k) ? 2 : k[1] == 'n' ? 0 : 1; };
  const int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb;
  if (ra == 2) return dict_key_value(a).as_string() < dict_key_value(b).as_string();  // byte order: code points
  if (ra == 0) return false;
  const Value x = dict_key_value(a), y = dict_key_value(b);
  const double dx = x.is_float() ? x.as_float() : static_cast<double>(x.is_bool() ? x.as_bool() : x.as_int());
  const double dy = y.is_float() ? y.as_float() : static_cast<double>(y.is_bool() ? y.as_bool() : y.as_int());
  if (!x.is_float() && !y.is_float()) {
    const std::int64_t ix = x.is_bool() ? x.as_bool() : x.as_int(), iy = y.is_bool() ? y.as_bool() : y.as_int();
    return ix < iy;
  }
  return dx < dy;
}

bool same_dict_key(std::string_view a, std::string_view b) {
  if (is_string_key(a) || is_string_key(b)) return a == b;  // one encoding per string
  // Typed keys: the type letter does not matter, the equality class does (None's "None"
  // is no number's text).
  return a.substr(2) == b.substr(2);
}

}  // namespace corvid::jinja
