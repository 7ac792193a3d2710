// jinja2's tests, and member access (obj.x, obj[k], obj[a:b]) as the
// sandboxed environment performs it. Filters: jinja_filters.cc; methods of
// str/list/dict: jinja_methods.cc.
#include "corvid/template/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {
namespace detail {

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::Array:
      return v.as_array();
    case Value::Kind::String: {
      std::vector<Value> chars;
      for (char32_t c : unicode::decode(v.as_string())) {
        std::string one;
        unicode::append(one, c);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    case Value::Kind::Object: {
      if (v.as_object().is_namespace) break;
      std::vector<Value> keys;
      for (const auto& entry : v.as_object().entries) keys.push_back(dict_key_value(entry.first));
      return keys;
    }
    default:
      break;
  }
  fail("'", v.type_name(), "' object is not iterable");
}

std::int64_t int_arg(const Value& v, std::string_view what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  fail("'", v.type_name(), "' object cannot be interpreted as an integer");
}

std::int64_t checked_width(std::int64_t width) {
  if (width > kMaxWidth) fail("width ", width, " is too large (at most ", kMaxWidth, ")");
  return width;
}

Value lookup_attribute_path(const Value& item, const Value& attribute) {
  if (attribute.is_none() || attribute.is_undefined()) return item;
  if (!attribute.is_string()) return get_item(item, attribute);
  Value current = item;
  const std::string& path = attribute.as_string();
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty();
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    const auto index = digits ? parse_python_int(part, 10) : std::nullopt;
    current = get_item(current, index ? Value(*index) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return current;
}

static bool comparable(const Value& a, const Value& b) {
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num || b_num) return a_num && b_num;
  return (a.is_string() && b.is_string()) || (a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple());
}

// Python's rich comparison for `op` in < <= > >=.
bool compare(std::string_view op, const Value& a, const Value& b) {
  // jinja2's Undefined raises its own error from every comparison.
  if (a.is_undefined()) fail(a.undefined_message());
  if (b.is_undefined()) fail(b.undefined_message());
  if (!comparable(a, b)) {
    fail("'", op, "' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
  }
  if ((a.is_list() || a.is_tuple()) && !(a == b)) {
    // Python compares sequences at their first differing items, with the same operator.
    const auto& x = a.as_array();
    const auto& y = b.as_array();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return compare(op, x[i], y[i]);
    }
  }
  if (op == "<") return Value::less(a, b);
  if (op == ">") return Value::less(b, a);
  if (op == "<=") return Value::less(a, b) || a == b;
  return Value::less(b, a) || a == b;
}

}  // namespace detail

namespace {

using detail::compare;

using detail::iterate;

[[noreturn]] void raise_undefined(const Value& v) { fail(v.undefined_message()); }

// Python's % for the odd/even/divisibleby tests.
Value python_modulo(const Value& a, const Value& b) {
  if (a.is_string()) fail("not all arguments converted during string formatting");
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (!a_num || !b_num) {
    fail("unsupported operand type(s) for %: '", a.type_name(), "' and '", b.type_name(), "'");
  }
  if (!a.is_float() && !b.is_float()) {
    const std::int64_t x = detail::int_arg(a, "%");
    const std::int64_t y = detail::int_arg(b, "%");
    if (y == 0) fail("integer modulo by zero");
    std::int64_t r = y == -1 ? 0 : x % y;  // INT64_MIN % -1 overflows in C++
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  const double x = a.is_bool() ? a.as_bool() : a.as_float();
  const double y = b.is_bool() ? b.as_bool() : b.as_float();
  if (y == 0) fail("float modulo");
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value(r);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string()) {
        fail("'in <string>' requires string as left operand, not ", item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::Object:
      if (container.as_object().is_namespace) break;
      if (item.is_string()) return container.as_object().find(item.as_string()) != nullptr;
      if (item.is_int()) return container.as_object().find(std::to_string(item.as_int())) != nullptr;
      return false;
    case Value::Kind::Array:
    case Value::Kind::Undefined:
      for (const Value& v : iterate(container)) {
        if (v == item) return true;
      }
      return false;
    default:
      break;
  }
  fail("argument of type '", container.type_name(), "' is not iterable");
}

bool all_cased_chars(const std::string& s, bool upper) {
  bool any_cased = false;
  for (char32_t c : unicode::decode(s)) {
    if (upper ? unicode::is_lower(c) : unicode::is_upper(c)) return false;
    if (unicode::is_cased(c)) {
      if (unicode::is_upper(c) != upper && unicode::is_lower(c) == upper) return false;
      any_cased = true;
    }
  }
  return any_cased;
}

const Value& required(const CallArgs& args, std::string_view test, std::string_view param) {
  const Value* v = args.get(param, 0);
  if (!v) fail(test, "() missing 1 required positional argument: '", param, "'");
  return *v;
}

using Test = bool (*)(const Value&, const CallArgs&);

const std::unordered_map<std::string_view, Test>& tests() {
  static const std::unordered_map<std::string_view, Test> table = [] {
    std::unordered_map<std::string_view, Test> t;
    t["defined"] = [](const Value& v, const CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, const CallArgs&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, const CallArgs&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, const CallArgs&) { return v.is_bool(); };
    t["true"] = [](const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); };
    t["integer"] = [](const Value& v, const CallArgs&) { return v.is_int(); };
    t["float"] = [](const Value& v, const CallArgs&) { return v.is_float(); };
    t["number"] = [](const Value& v, const CallArgs&) { return v.is_number() || v.is_bool(); };
    t["string"] = [](const Value& v, const CallArgs&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, const CallArgs&) {
      return v.is_object() && !v.as_object().is_namespace;
    };
    // Python: has __len__ and __getitem__ (str, list, tuple, dict; jinja2's Undefined too).
    t["sequence"] = [](const Value& v, const CallArgs&) {
      return v.is_string() || v.is_list() || v.is_tuple() || v.is_undefined() ||
             (v.is_object() && !v.as_object().is_namespace);
    };
    t["iterable"] = [](const Value& v, const CallArgs&) {
      return v.is_string() || v.is_array() || v.is_undefined() || (v.is_object() && !v.as_object().is_namespace);
    };
    t["callable"] = [](const Value& v, const CallArgs&) { return v.is_function(); };
    t["sameas"] = [](const Value& v, const CallArgs& a) {
      const Value& other = required(a, "test_sameas", "other");
      if (v.kind() != other.kind()) return false;
      switch (v.kind()) {
        case Value::Kind::None:
        case Value::Kind::Undefined:
          return true;
        case Value::Kind::Bool:
          return v.as_bool() == other.as_bool();
        case Value::Kind::Int:  // CPython shares the small ints
          return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
        case Value::Kind::Array:
          return &v.as_array() == &other.as_array();
        case Value::Kind::Object:
          return &v.as_object() == &other.as_object();
        case Value::Kind::Function:
          return &v.as_function() == &other.as_function();
        default:
          return false;
      }
    };
    auto eq = [](const Value& v, const CallArgs& a) { return v == required(a, "test_eq", "other"); };
    auto ne = [](const Value& v, const CallArgs& a) { return !(v == required(a, "test_ne", "other")); };
    auto lt = [](const Value& v, const CallArgs& a) { return compare("<", v, required(a, "test_lt", "other")); };
    auto le = [](const Value& v, const CallArgs& a) { return compare("<=", v, required(a, "test_le", "other")); };
    auto gt = [](const Value& v, const CallArgs& a) { return compare(">", v, required(a, "test_gt", "other")); };
    auto ge = [](const Value& v, const CallArgs& a) { return compare(">=", v, required(a, "test_ge", "other")); };
    for (auto name : {"eq", "equalto", "=="}) t[name] = eq;
    for (auto name : {"ne", "!="}) t[name] = ne;
    for (auto name : {"lt", "lessthan", "<"}) t[name] = lt;
    for (auto name : {"le", "<="}) t[name] = le;
    for (auto name : {"gt", "greaterthan", ">"}) t[name] = gt;
    for (auto name : {"ge", ">="}) t[name] = ge;
    t["in"] = [](const Value& v, const CallArgs& a) { return contains(required(a, "test_in", "seq"), v); };
    t["odd"] = [](const Value& v, const CallArgs&) { return python_modulo(v, Value(2)) == Value(1); };
    t["even"] = [](const Value& v, const CallArgs&) { return python_modulo(v, Value(2)) == Value(0); };
    t["divisibleby"] = [](const Value& v, const CallArgs& a) {
      return python_modulo(v, required(a, "test_divisibleby", "num")) == Value(0);
    };
    t["lower"] = [](const Value& v, const CallArgs&) { return all_cased_chars(v.str(), false); };
    t["upper"] = [](const Value& v, const CallArgs&) { return all_cased_chars(v.str(), true); };
    t["escaped"] = [](const Value& v, const CallArgs&) { return v.is_markup(); };
    t["filter"] = [](const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.as_string()); };
    t["test"] = [](const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); };
    return t;
  }();
  return table;
}

// Python's slice.indices(): clamps start/stop for a sequence of `length`.
struct SliceRange {
  std::int64_t start, stop, step;
};

SliceRange slice_indices(std::int64_t length, const Value& start, const Value& stop, const Value& step) {
  auto absent = [](const Value& v) { return v.is_undefined() || v.is_none(); };
  auto index = [](const Value& v) {
    if (!v.is_int() && !v.is_bool()) {
      fail("slice indices must be integers or None or have an __index__ method");
    }
    return detail::int_arg(v, "slice");
  };
  SliceRange r{0, 0, absent(step) ? 1 : index(step)};
  if (r.step == 0) fail("slice step cannot be zero");
  // Any |step| beyond the length selects at most one item; clamping keeps i += step from overflowing.
  r.step = std::clamp<std::int64_t>(r.step, -(std::int64_t{1} << 62), std::int64_t{1} << 62);
  const std::int64_t lower = r.step < 0 ? -1 : 0;
  const std::int64_t upper = r.step < 0 ? length - 1 : length;
  auto clamp = [&](const Value& v, std::int64_t fallback) {
    if (absent(v)) return fallback;
    std::int64_t i = index(v);
    if (i < 0) {
      i += length;
      if (i < lower) i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  r.start = clamp(start, r.step < 0 ? upper : lower);
  r.stop = clamp(stop, r.step < 0 ? lower : upper);
  return r;
}

template <class Seq, class Out>
void take_slice(const Seq& seq, const SliceRange& r, Out&& out) {
  if (r.step > 0) {
    for (std::int64_t i = r.start; i < r.stop; i += r.step) out(seq[static_cast<std::size_t>(i)]);
  } else {
    for (std::int64_t i = r.start; i > r.stop; i += r.step) out(seq[static_cast<std::size_t>(i)]);
  }
}

}  // namespace

bool apply_test(std::string_view name, const Value& target, const CallArgs& args) {
  const auto& table = tests();
  const auto it = table.find(name);
  if (it == table.end()) fail("No test named '", name, "'.");
  return it->second(target, args);
}

bool has_test(std::string_view name) { return tests().count(name) != 0; }

Value get_attribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_object() && obj.as_object().is_namespace) {
    if (const Value* v = obj.as_object().find(name)) return *v;
    return Value::undefined_member(obj, Value(std::string(name)));
  }
  // Python objects do have dunder attributes; the sandbox refuses them all.
  if (name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__") {
    return Value::undefined_with_message("access to attribute '" + std::string(name) + "' of '" +
                                         obj.type_name() + "' object is unsafe.");
  }
  if (obj.is_tuple() && obj.name() == "_GroupTuple" && (name == "grouper" || name == "list")) {
    return obj.as_array()[name == "grouper" ? 0 : 1];
  }
  // getattr first (so d.items is the method even when d has a key "items"), then getitem.
  if (auto method = detail::bound_method(obj, name)) return *method;
  if (obj.is_object()) {
    if (const Value* v = obj.as_object().find(name)) return *v;
  }
  return Value::undefined_member(obj, Value(std::string(name)));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  switch (obj.kind()) {
    case Value::Kind::Object: {
      const bool hashable = key.is_string() || key.is_none() || key.is_bool() || key.is_int() || key.is_float();
      if (hashable && (key.is_string() || !obj.as_object().is_namespace)) {
        if (const Value* v = obj.as_object().find(dict_key(key))) return *v;
      }
      break;
    }
    case Value::Kind::Array:
    case Value::Kind::String: {
      if (!key.is_int() && !key.is_bool()) break;
      if (obj.is_iterator() || obj.is_view()) break;  // not subscriptable
      std::int64_t i = detail::int_arg(key, "index");
      if (obj.is_array()) {
        const auto n = static_cast<std::int64_t>(obj.as_array().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.as_array()[static_cast<std::size_t>(i)];
      } else {
        const std::u32string text = unicode::decode(obj.as_string());
        const auto n = static_cast<std::int64_t>(text.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(unicode::encode(text.substr(static_cast<std::size_t>(i), 1)));
      }
      break;
    }
    default:
      break;
  }
  // obj[key] failed: jinja2 then tries getattr(obj, key) for a str key.
  if (key.is_string()) {
    if (auto method = detail::bound_method(obj, key.as_string())) return *method;
  }
  return Value::undefined_member(obj, key);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_list() || obj.is_tuple()) {
    const auto& items = obj.as_array();
    const SliceRange r = slice_indices(static_cast<std::int64_t>(items.size()), start, stop, step);
    std::vector<Value> out;
    take_slice(items, r, [&](const Value& v) { out.push_back(v); });
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
  }
  if (obj.is_string()) {
    const std::u32string text = unicode::decode(obj.as_string());
    const SliceRange r = slice_indices(static_cast<std::int64_t>(text.size()), start, stop, step);
    std::u32string out;
    take_slice(text, r, [&](char32_t c) { out.push_back(c); });
    return Value(unicode::encode(out));
  }
  // jinja2 compiles a slice to a plain Python subscript, so these raise at once.
  if (obj.is_object() && !obj.as_object().is_namespace) fail("unhashable type: 'slice'");
  fail("'", obj.type_name(), "' object is not subscriptable");
}

}  // namespace corvid::jinja
