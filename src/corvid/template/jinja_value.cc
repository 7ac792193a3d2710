#include "corvid/template/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <limits>

#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {

const Value* CallArgs::get(std::string_view name, std::size_t index) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (same_dict_key(k, key)) return v.get();
  }
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries) {
    if (same_dict_key(k, key)) {
      v = std::make_shared<Value>(std::move(value));
      return;
    }
  }
  entries.emplace_back(key, std::make_shared<Value>(std::move(value)));
}

Value Value::undefined(std::string name) {
  Value v;
  v.name_ = std::move(name);
  return v;
}

namespace {

// jinja2's object_type_repr: how an error message names a value's type.
std::string object_type_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  if (obj.is_object() && obj.as_object().is_namespace) return "jinja2.utils.Namespace object";
  return obj.type_name() + " object";
}

}  // namespace

Value Value::undefined_member(const Value& obj, const Value& key) {
  Value v;
  if (key.is_string()) {
    v.name_ = key.as_string();
    v.undefined_hint_ = python_string_repr(object_type_repr(obj)) + " has no attribute " + key.repr();
  } else {
    v.name_ = key.str();
    v.undefined_hint_ = object_type_repr(obj) + " has no element " + key.repr();
  }
  return v;
}

Value Value::undefined_with_message(std::string message) {
  Value v;
  v.undefined_hint_ = std::move(message);
  return v;
}

std::string Value::undefined_message() const {
  if (!undefined_hint_.empty()) return undefined_hint_;
  return python_string_repr(name_) + " is undefined";
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(std::int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double d) : kind_(Kind::Float), d_(d) {}
Value::Value(std::string s)
    : kind_(Kind::String), s_(std::make_shared<const std::string>(std::move(s))) {}

namespace {

[[noreturn]] void nesting_too_deep() {
  fail("maximum recursion depth exceeded (values nested more than ", kMaxNesting, " deep)");
}

// Guards recursion that depth_ cannot bound (namespaces may contain themselves).
class RecursionGuard {
 public:
  explicit RecursionGuard(const char* while_doing) {
    if (++depth() > static_cast<int>(kMaxNesting) + 16) {
      --depth();
      fail("maximum recursion depth exceeded", while_doing);
    }
  }
  ~RecursionGuard() { --depth(); }
  RecursionGuard(const RecursionGuard&) = delete;
  RecursionGuard& operator=(const RecursionGuard&) = delete;

 private:
  static int& depth() {
    thread_local int value = 0;
    return value;
  }
};

}  // namespace

Value Value::array(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Array;
  std::uint32_t deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth_);
  if (deepest >= kMaxNesting) nesting_too_deep();
  v.depth_ = deepest + 1;
  v.a_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = array(std::move(items));
  v.flavor_ = Flavor::Tuple;
  return v;
}

Value Value::named_tuple(std::vector<Value> items, std::string type_name) {
  Value v = tuple(std::move(items));
  v.name_ = std::move(type_name);
  return v;
}

Value Value::iterator(std::vector<Value> items, std::string type_name) {
  Value v = array(std::move(items));
  v.flavor_ = Flavor::Iterator;
  v.name_ = std::move(type_name);
  return v;
}

Value Value::view(std::vector<Value> items, std::string type_name) {
  Value v = array(std::move(items));
  v.flavor_ = Flavor::View;
  v.name_ = std::move(type_name);
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

bool Value::has_len() const {
  return kind_ == Kind::String || (kind_ == Kind::Array && flavor_ != Flavor::Iterator) ||
         (kind_ == Kind::Object && !o_->is_namespace);
}

Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::Object;
  v.o_ = object ? std::move(object) : std::make_shared<Object>();
  std::uint32_t deepest = 0;
  if (!v.o_->is_namespace) {  // a namespace's attributes change later; RecursionGuard bounds those
    for (const auto& entry : v.o_->entries) deepest = std::max(deepest, entry.second->depth_);
  }
  if (deepest >= kMaxNesting) nesting_too_deep();
  v.depth_ = deepest + 1;
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::Function;
  v.name_ = std::move(name);
  v.f_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::from_json(const Json& j) {
  // Checked top-down too: the recursion below must not outrun the stack.
  const RecursionGuard guard("");
  switch (j.type()) {
    case Json::value_t::null:
      return none();
    case Json::value_t::boolean:
      return Value(j.get<bool>());
    case Json::value_t::number_integer:
      return Value(j.get<std::int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return Value(static_cast<std::int64_t>(u));
      }
      return Value(static_cast<double>(u));  // beyond int64: the nearest float
    }
    case Json::value_t::number_float:
      return Value(j.get<double>());
    case Json::value_t::string:
      return Value(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return array(std::move(items));
    }
    case Json::value_t::object: {
      auto object = std::make_shared<Object>();
      object->entries.reserve(j.size());
      for (const auto& [key, item] : j.items()) {
        object->entries.emplace_back(key, std::make_shared<Value>(from_json(item)));
      }
      return Value::object(std::move(object));
    }
    default:
      fail("template values: unsupported JSON value (binary)");
  }
}

Json Value::to_json() const {
  const RecursionGuard guard(" while encoding a JSON object");
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return nullptr;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_;
    case Kind::Float:
      return d_;
    case Kind::String:
      return *s_;
    case Kind::Array: {
      if (flavor_ == Flavor::Iterator || flavor_ == Flavor::View) {
        fail("Object of type ", name_, " is not JSON serializable");
      }
      Json out = Json::array();
      for (const auto& item : *a_) out.push_back(item.to_json());
      return out;
    }
    case Kind::Object: {
      Json out = Json::object();
      for (const auto& [key, item] : o_->entries) out[dict_key_json_text(key)] = item->to_json();
      return out;
    }
    case Kind::Function:
      break;
  }
  fail("Object of type function is not JSON serializable");
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return d_ != 0.0;
    case Kind::String:
      return !s_->empty();
    case Kind::Array:
      return flavor_ == Flavor::Iterator || !a_->empty();  // a generator is always true
    case Kind::Object:
      return o_->is_namespace || !o_->entries.empty();
    case Kind::Function:
      return true;
  }
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out as Python's
  // float_repr_style 'short': positional when -4 < exponent < 16.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const auto e_pos = sci.find('e');
  std::string digits;
  for (std::size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<std::size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits, 1);
  }
  char exp_text[16];
  std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_text;
}

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : unicode::decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      char esc[16];  // an undecodable byte, as Python shows a surrogate escape
      std::snprintf(esc, sizeof esc, "\\udc%02x", static_cast<unsigned>(c & 0xFF));
      out += esc;
    } else if (c < 0x7F && c >= 0x20) {
      out.push_back(static_cast<char>(c));
    } else if (unicode::is_printable(c)) {
      unicode::append(out, c);
    } else {
      char esc[16];
      if (c < 0x100) {
        std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(esc, sizeof esc, "\\U%08x", static_cast<unsigned>(c));
      }
      out += esc;
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return *s_;
    case Kind::Object:
      if (o_->is_namespace) {
        // jinja2's Namespace prints its attribute dict.
        auto copy = std::make_shared<Object>(*o_);
        copy->is_namespace = false;
        return "<Namespace " + object(copy).repr() + ">";
      }
      return repr();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  const RecursionGuard guard(" while getting the repr of an object");
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return b_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return python_float_repr(d_);
    case Kind::String:
      return markup_ ? "Markup(" + python_string_repr(*s_) + ")" : python_string_repr(*s_);
    case Kind::Array: {
      if (flavor_ == Flavor::Iterator) return "<" + name_ + " object>";
      const bool tuple = flavor_ == Flavor::Tuple;
      std::string out = tuple ? "(" : "[";
      for (std::size_t i = 0; i < a_->size(); ++i) {
        if (i) out += ", ";
        out += (*a_)[i].repr();
      }
      if (tuple) return out + (a_->size() == 1 ? ",)" : ")");
      if (flavor_ == Flavor::View) return name_ + "(" + out + "])";
      return out + "]";
    }
    case Kind::Object: {
      if (o_->is_namespace) return str();
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : o_->entries) {
        if (!first) out += ", ";
        first = false;
        out += dict_key_value(key).repr() + ": " + item->repr();
      }
      return out + "}";
    }
    case Kind::Function:
      return "<function " + name_ + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Array:
      if (flavor_ == Flavor::Tuple) return name_.empty() ? "tuple" : name_;
      return flavor_ == Flavor::List ? "list" : name_;
    case Kind::Object:
      return o_->is_namespace ? "Namespace" : "dict";
    case Kind::Function:
      return "function";
  }
  return "object";
}

namespace {

bool is_numeric_like(const Value& v) { return v.is_number() || v.is_bool(); }

std::int64_t integral(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

// Python compares an int with a float exactly (2**53 + 1 != 2.0**53).
constexpr double kTwo63 = 9223372036854775808.0;

bool int_equals_float(std::int64_t i, double d) {
  if (!(d >= -kTwo63 && d < kTwo63) || d != std::floor(d)) return false;
  return static_cast<std::int64_t>(d) == i;
}

bool int_less_than_float(std::int64_t i, double d) {
  if (std::isnan(d)) return false;
  if (d >= kTwo63) return true;
  if (d < -kTwo63) return false;
  const double f = std::floor(d);
  const auto fi = static_cast<std::int64_t>(f);
  return i < fi || (i == fi && d > f);
}

bool float_less_than_int(double d, std::int64_t i) {
  return !std::isnan(d) && !int_less_than_float(i, d) && !int_equals_float(i, d);
}

}  // namespace

bool operator==(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (is_numeric_like(a) && is_numeric_like(b)) {
    if (!a.is_float() && !b.is_float()) return integral(a) == integral(b);
    if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
    return a.is_float() ? int_equals_float(integral(b), a.as_float()) : int_equals_float(integral(a), b.as_float());
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.as_string() == b.as_string();
    case Kind::Array: {
      if (a.flavor_ != b.flavor_ || a.is_iterator()) return &a.as_array() == &b.as_array();
      const auto& x = a.as_array();
      const auto& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!(x[i] == y[i])) return false;
      }
      return true;
    }
    case Kind::Object: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.find(key);
        if (!other || !(*item == *other)) return false;
      }
      return true;
    }
    case Kind::Function:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

bool Value::less(const Value& a, const Value& b) {
  // jinja2's Undefined raises its own error from every comparison.
  if (a.is_undefined()) fail(a.undefined_message());
  if (b.is_undefined()) fail(b.undefined_message());
  if (is_numeric_like(a) && is_numeric_like(b)) {
    if (!a.is_float() && !b.is_float()) return integral(a) < integral(b);
    if (a.is_float() && b.is_float()) return a.as_float() < b.as_float();
    return a.is_float() ? float_less_than_int(a.as_float(), integral(b)) : int_less_than_float(integral(a), b.as_float());
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps code point order
  if (a.is_array() && b.is_array() && a.flavor_ == b.flavor_ && (a.is_list() || a.is_tuple())) {
    const auto& x = a.as_array();
    const auto& y = b.as_array();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

}  // namespace corvid::jinja
