// jinja2's built-in filters (jinja2/filters.py), with transformers' tojson.
// Where jinja2 returns a generator (map, select, items, ...) these return a
// Value::iterator, which behaves as one. Sequence filters: jinja_filters_seq.cc;
// tojson's serializer: jinja_json.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {

std::int64_t detail::int_param(const CallArgs& a, std::string_view name, std::size_t index, std::int64_t fallback) {
  const Value* v = optional_arg(a, name, index);
  return v ? int_arg(*v, name) : fallback;
}

Value detail::ignore_case(const Value& v) { return v.is_string() ? Value(unicode::lower(v.as_string())) : v; }

namespace {

using namespace detail;


// Python's a + b for sum().
Value add(const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.undefined_message());  // Undefined's + raises
  if (b.is_undefined()) fail(b.undefined_message());
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if (!a.is_float() && !b.is_float()) {
      std::int64_t sum = 0;
      if (__builtin_add_overflow(int_arg(a, "+"), int_arg(b, "+"), &sum)) fail("integer overflow (beyond 64 bits)");
      return Value(sum);
    }
    auto f = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float(); };
    return Value(f(a) + f(b));
  }
  if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (a.is_array() && b.is_array()) {
    std::vector<Value> items = a.as_array();
    items.insert(items.end(), b.as_array().begin(), b.as_array().end());
    return Value::array(std::move(items));
  }
  fail("unsupported operand type(s) for +: '", a.type_name(), "' and '", b.type_name(), "'");
}

}  // namespace

std::string detail::html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

namespace {

using detail::html_escape;

// html.unescape for the entities markup commonly carries.
std::string html_unescape(const std::string& s) {
  static const std::pair<std::string_view, std::string_view> named[] = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    const std::size_t semi = s.find(';', i);
    if (semi != std::string::npos && semi - i <= 10) {
      const std::string entity = s.substr(i + 1, semi - i - 1);
      std::optional<std::int64_t> code;
      if (entity.size() > 1 && entity[0] == '#') {
        code = (entity[1] == 'x' || entity[1] == 'X') ? detail::parse_python_int(entity.substr(2), 16)
                                                       : detail::parse_python_int(entity.substr(1), 10);
      }
      if (code && *code > 0 && *code <= 0x10FFFF) {
        unicode::append(out, static_cast<char32_t>(*code));
        i = semi;
        continue;
      }
      bool replaced = false;
      for (const auto& [name, text] : named) {
        if (entity == name) {
          out += text;
          i = semi;
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out.push_back('&');
  }
  return out;
}

std::string join_strings(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// Python round(x, ndigits) for a float: correctly rounded, ties to even.
double python_round(double x, std::int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<std::int64_t>(ndigits, 300)), x);
    return std::strtod(buf, nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, x);
  const double scale = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / scale) * scale;
}

// Python round(int, ndigits < 0): exact, ties to even.
std::int64_t python_round_int(std::int64_t i, std::int64_t ndigits) {
  if (ndigits < -18) return 0;
  std::int64_t scale = 1;
  for (std::int64_t k = 0; k < -ndigits; ++k) scale *= 10;
  std::int64_t quotient = i / scale;
  const std::int64_t remainder = i % scale;  // same sign as i
  const std::int64_t magnitude = remainder < 0 ? -remainder : remainder;
  if (magnitude * 2 > scale || (magnitude * 2 == scale && quotient % 2 != 0)) quotient += remainder < 0 ? -1 : 1;
  std::int64_t result = 0;
  if (__builtin_mul_overflow(quotient, scale, &result)) fail("integer overflow (beyond 64 bits)");
  return result;
}

// int(float): Python's ints are unbounded; corvid's stop at 64 bits.
std::int64_t float_to_int(double d) {
  const double whole = std::trunc(d);
  if (!(whole >= -9223372036854775808.0 && whole < 9223372036854775808.0)) fail("integer overflow (beyond 64 bits)");
  return static_cast<std::int64_t>(whole);
}

Value do_int(const Value& v, const CallArgs& args) {
  const Value* fallback = optional_arg(args, "default", 0);
  const Value result_default = fallback ? *fallback : Value(0);
  const int base = static_cast<int>(int_param(args, "base", 1, 10));
  if (v.is_undefined()) fail(v.undefined_message());  // int(Undefined) raises in jinja2
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(static_cast<std::int64_t>(v.as_bool()));
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) fail("cannot convert float ", python_float_repr(v.as_float()), " to integer");
    return Value(float_to_int(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = detail::parse_python_int(v.as_string(), base)) return Value(*i);
    if (auto d = detail::parse_python_float(v.as_string()); d && std::isfinite(*d)) {
      return Value(float_to_int(*d));
    }
  }
  return result_default;
}

Value do_float(const Value& v, const CallArgs& args) {
  const Value* fallback = optional_arg(args, "default", 0);
  if (v.is_undefined()) fail(v.undefined_message());
  if (v.is_number()) return Value(v.as_float());
  if (v.is_bool()) return Value(v.as_bool() ? 1.0 : 0.0);
  if (v.is_string()) {
    if (auto d = detail::parse_python_float(v.as_string())) return Value(*d);
  }
  return fallback ? *fallback : Value(0.0);
}

Value do_round(const Value& v, const CallArgs& args) {
  const std::int64_t precision = int_param(args, "precision", 0, 0);
  const Value* method_arg = optional_arg(args, "method", 1);
  const std::string method = method_arg ? method_arg->str() : "common";
  if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
  if (!v.is_number() && !v.is_bool()) fail("type ", v.type_name(), " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) {  // round(int, n) stays an int
      const std::int64_t i = int_arg(v, "round");
      if (precision >= 0) return Value(i);
      return Value(python_round_int(i, precision));
    }
    return Value(python_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = (v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float()) * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value do_indent(const Value& v, const CallArgs& args) {
  // jinja2 starts with `s += "\n"`, which only a str survives.
  if (v.is_undefined()) fail(v.undefined_message());
  if (v.is_list()) fail("'list' object has no attribute 'splitlines'");
  if (v.is_tuple()) fail("can only concatenate tuple (not \"str\") to tuple");
  if (!v.is_string()) fail("unsupported operand type(s) for +=: '", v.type_name(), "' and 'str'");
  const Value* width = optional_arg(args, "width", 0);
  std::string indention = "    ";
  if (width && width->is_string()) {
    indention = width->as_string();
  } else if (width) {
    indention = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, checked_width(int_arg(*width, "width")))), ' ');
  }
  const bool first = bool_param(args, "first", 1, false);
  const bool blank = bool_param(args, "blank", 2, false);
  std::vector<std::string> lines = detail::splitlines(v.str() + "\n", false);
  std::string out;
  if (blank) {
    out = join_strings(lines, "\n" + indention);
  } else {
    out = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out.push_back('\n');
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  return Value(first ? indention + out : out);
}

Value do_truncate(const Value& v, const CallArgs& args) {
  if (!v.is_string() && !v.is_undefined() && !v.has_len()) {
    fail("object of type '", v.type_name(), "' has no len()");
  }
  const std::int64_t length = int_param(args, "length", 0, 255);
  const bool killwords = bool_param(args, "killwords", 1, false);
  const Value* end_arg = optional_arg(args, "end", 2);
  const std::string end = end_arg ? end_arg->str() : "...";
  const std::int64_t leeway = int_param(args, "leeway", 3, 5);
  const auto end_len = static_cast<std::int64_t>(unicode::length(end));
  if (length < end_len) fail("expected length >= ", end_len, ", got ", length);
  if (leeway < 0) fail("expected leeway >= 0, got ", leeway);
  if (v.is_array() || v.is_object()) {  // len() counts items; longer ones cannot be cut like text
    const std::int64_t n = static_cast<std::int64_t>(v.is_array() ? v.as_array().size() : v.as_object().entries.size());
    if (n - leeway <= length) return v;
    fail("cannot truncate a ", v.type_name());
  }
  const std::string s = v.str();
  const std::u32string text = unicode::decode(s);
  if (static_cast<std::int64_t>(text.size()) - leeway <= length) return v;  // unchanged, even an Undefined
  const std::string head = unicode::encode(std::u32string_view(text).substr(0, static_cast<std::size_t>(length - end_len)));
  if (killwords) return Value(head + end);
  const std::size_t space = head.rfind(' ');
  return Value((space == std::string::npos ? head : head.substr(0, space)) + end);
}

Value do_title(const Value& v) {
  // jinja2 splits on runs of [-\s({\[<] and uppercases each piece's first character.
  const std::u32string text = unicode::decode(v.str());
  auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = i;
    const bool sep = separator(text[i]);
    while (j < text.size() && separator(text[j]) == sep) ++j;
    const std::u32string_view piece = std::u32string_view(text).substr(i, j - i);
    if (sep) {
      out += unicode::encode(piece);
    } else {
      out += unicode::upper(unicode::encode(piece.substr(0, 1))) + unicode::lower(unicode::encode(piece.substr(1)));
    }
    i = j;
  }
  return Value(out);
}

Value do_striptags(const Value& v) {
  std::string s = v.str();
  for (std::size_t start; (start = s.find("<!--")) != std::string::npos;) {
    const std::size_t end = s.find("-->", start);
    if (end == std::string::npos) break;
    s.erase(start, end + 3 - start);
  }
  for (std::size_t start; (start = s.find('<')) != std::string::npos;) {
    const std::size_t end = s.find('>', start);
    if (end == std::string::npos) break;
    s.erase(start, end + 1 - start);
  }
  return Value(html_unescape(join_strings(detail::split(s, nullptr, -1, false), " ")));
}

Value do_tojson(const Value& v, const CallArgs& args) {
  JsonDumpOptions options;
  options.ensure_ascii = bool_param(args, "ensure_ascii", 0, false);
  if (const Value* indent = optional_arg(args, "indent", 1)) options.indent = *indent;
  if (const Value* separators = optional_arg(args, "separators", 2); separators && !separators->is_none()) {
    if (!separators->is_array() || separators->as_array().size() != 2) {
      fail("not enough values to unpack (expected 2)");
    }
    options.item_separator = separators->as_array()[0].str();
    options.key_separator = separators->as_array()[1].str();
  }
  options.sort_keys = bool_param(args, "sort_keys", 3, false);
  return Value(dump_json(v, options));
}

using Filter = Value (*)(const Value&, const CallArgs&);

const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table = [] {
    std::unordered_map<std::string_view, Filter> f;
    f["abs"] = [](const Value& v, const CallArgs&) {
      if (v.is_float()) return Value(std::fabs(v.as_float()));
      if (v.is_int() || v.is_bool()) {
        const std::int64_t i = int_arg(v, "abs");
        if (i == INT64_MIN) fail("integer overflow (beyond 64 bits)");
        return Value(i < 0 ? -i : i);
      }
      fail("bad operand type for abs(): '", v.type_name(), "'");
    };
    f["attr"] = [](const Value& v, const CallArgs& a) {
      const Value* name = optional_arg(a, "name", 0);
      if (!name) fail("do_attr() missing 1 required positional argument: 'name'");
      if (v.is_undefined()) fail(v.undefined_message());
      if (v.is_object() && v.as_object().is_namespace) return get_attribute(v, name->str());
      if (auto method = detail::bound_method(v, name->str())) return *method;
      return Value::undefined_member(v, *name);
    };
    f["batch"] = [](const Value& v, const CallArgs& a) { return do_batch_or_slice(v, a, true); };
    f["groupby"] = detail::do_groupby;
    f["slice"] = [](const Value& v, const CallArgs& a) { return do_batch_or_slice(v, a, false); };
    f["capitalize"] = [](const Value& v, const CallArgs&) { return Value(unicode::capitalize(v.str())); };
    f["center"] = [](const Value& v, const CallArgs& a) {
      return Value(detail::center(v.str(), int_param(a, "width", 0, 80), ' '));
    };
    f["default"] = [](const Value& v, const CallArgs& a) {
      const Value* fallback = a.get("default_value", 0);
      if (v.is_undefined() || (bool_param(a, "boolean", 1, false) && !v.truthy())) return fallback ? *fallback : Value("");
      return v;
    };
    f["d"] = f["default"];
    f["dictsort"] = do_dictsort;
    f["escape"] = [](const Value& v, const CallArgs&) { return v.is_markup() ? v : Value::markup(html_escape(v.str())); };
    f["e"] = f["escape"];
    f["forceescape"] = [](const Value& v, const CallArgs&) { return Value::markup(html_escape(v.str())); };
    f["first"] = [](const Value& v, const CallArgs&) {
      const std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined_with_message("No first item, sequence was empty.") : items.front();
    };
    f["last"] = [](const Value& v, const CallArgs&) {
      if (!v.is_undefined() && !v.is_string() && !v.is_list() && !v.is_tuple() && !v.is_object() && !v.is_view()) {
        fail("'", v.type_name(), "' object is not reversible");
      }
      const std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined_with_message("No last item, sequence was empty.") : items.back();
    };
    f["float"] = do_float;
    f["int"] = do_int;
    f["items"] = [](const Value& v, const CallArgs&) {
      if (v.is_undefined()) return generator({});
      if (!v.is_object() || v.as_object().is_namespace) fail("Can only get item pairs from a mapping.");
      std::vector<Value> out;
      for (const auto& [key, value] : v.as_object().entries) out.push_back(tuple_pair(key, *value));
      return generator(std::move(out));
    };
    f["join"] = [](const Value& v, const CallArgs& a) {
      const Value* sep = optional_arg(a, "d", 0);
      const Value* attribute = optional_arg(a, "attribute", 1);
      std::vector<std::string> parts;
      for (const Value& item : iterate(v)) {
        parts.push_back((attribute ? detail::lookup_attribute_path(item, *attribute) : item).str());
      }
      return Value(join_strings(parts, sep ? sep->str() : ""));
    };
    f["length"] = [](const Value& v, const CallArgs&) {
      if (v.is_string()) return Value(static_cast<std::int64_t>(unicode::length(v.as_string())));
      if (v.is_array() && v.has_len()) return Value(static_cast<std::int64_t>(v.as_array().size()));
      if (v.is_object() && !v.as_object().is_namespace) {
        return Value(static_cast<std::int64_t>(v.as_object().entries.size()));
      }
      if (v.is_undefined()) return Value(0);
      fail("object of type '", v.type_name(), "' has no len()");
    };
    f["count"] = f["length"];
    f["list"] = [](const Value& v, const CallArgs&) { return Value::array(iterate(v)); };
    f["lower"] = [](const Value& v, const CallArgs&) { return Value(unicode::lower(v.str())); };
    f["upper"] = [](const Value& v, const CallArgs&) { return Value(unicode::upper(v.str())); };
    f["map"] = map_items;
    f["max"] = [](const Value& v, const CallArgs& a) { return min_or_max(v, a, true); };
    f["min"] = [](const Value& v, const CallArgs& a) { return min_or_max(v, a, false); };
    f["select"] = [](const Value& v, const CallArgs& a) { return select_items(v, a, true, false); };
    f["reject"] = [](const Value& v, const CallArgs& a) { return select_items(v, a, false, false); };
    f["selectattr"] = [](const Value& v, const CallArgs& a) { return select_items(v, a, true, true); };
    f["rejectattr"] = [](const Value& v, const CallArgs& a) { return select_items(v, a, false, true); };
    f["replace"] = [](const Value& v, const CallArgs& a) {
      const Value* old_text = optional_arg(a, "old", 0);
      const Value* new_text = optional_arg(a, "new", 1);
      if (!old_text || !new_text) fail("do_replace() missing required positional arguments: 'old' and 'new'");
      const Value* count = optional_arg(a, "count", 2);
      return Value(detail::replace(v.str(), old_text->str(), new_text->str(),
                                   count && !count->is_none() ? int_arg(*count, "count") : -1));
    };
    f["reverse"] = [](const Value& v, const CallArgs&) {
      if (!v.is_undefined() && !v.is_string() && !v.is_array() && !v.is_object()) fail("argument must be iterable");
      if (v.is_string()) {
        std::u32string text = unicode::decode(v.as_string());
        std::reverse(text.begin(), text.end());
        return Value(unicode::encode(text));
      }
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      // Python's reversed() iterators; what cannot be reversed becomes a reversed list.
      if (v.is_list()) return Value::iterator(std::move(items), "list_reverseiterator");
      if (v.is_tuple()) return Value::iterator(std::move(items), "reversed");
      if (v.is_object()) return Value::iterator(std::move(items), "dict_reversekeyiterator");
      return Value::array(std::move(items));
    };
    f["round"] = do_round;
    f["safe"] = [](const Value& v, const CallArgs&) { return v.is_markup() ? v : Value::markup(v.str()); };
    f["sort"] = do_sort;
    f["string"] = [](const Value& v, const CallArgs&) { return v.is_markup() ? v : Value(v.str()); };
    f["sum"] = [](const Value& v, const CallArgs& a) {
      const Value* attribute = optional_arg(a, "attribute", 0);
      const Value* start = optional_arg(a, "start", 1);
      Value total = start ? *start : Value(0);
      for (const Value& item : iterate(v)) {
        total = add(total, attribute ? detail::lookup_attribute_path(item, *attribute) : item);
      }
      return total;
    };
    f["title"] = [](const Value& v, const CallArgs&) { return do_title(v); };
    f["tojson"] = do_tojson;
    f["trim"] = [](const Value& v, const CallArgs& a) { return Value(detail::strip(v.str(), optional_arg(a, "chars", 0), true, true)); };
    f["truncate"] = do_truncate;
    f["unique"] = do_unique;
    f["wordcount"] = [](const Value& v, const CallArgs&) {
      std::int64_t words = 0;
      bool in_word = false;
      for (char32_t c : unicode::decode(v.str())) {
        const bool word_char = c == '_' || unicode::is_alpha(c) || unicode::is_numeric(c);
        if (word_char && !in_word) ++words;
        in_word = word_char;
      }
      return Value(words);
    };
    f["indent"] = do_indent;
    f["format"] = [](const Value& v, const CallArgs& a) {
      if (!a.positional.empty() && !a.keyword.empty()) {
        fail("can't handle positional and keyword arguments at the same time");
      }
      const Value format = v.is_string() ? v : Value(v.str());
      Value args = Value::tuple(a.positional);
      if (!a.keyword.empty()) {
        auto object = std::make_shared<Object>();
        for (const auto& [key, value] : a.keyword) object->set(key, value);
        args = Value::object(object);
      }
      std::string text = percent_format(format, args);
      return format.is_markup() ? Value::markup(std::move(text)) : Value(std::move(text));
    };
    f["filesizeformat"] = [](const Value& v, const CallArgs& a) {
      double bytes = 0;  // Python's float(value)
      if (v.is_undefined()) fail(v.undefined_message());
      if (v.is_string()) {
        const auto parsed = detail::parse_python_float(v.as_string());
        if (!parsed) fail("could not convert string to float: ", v.repr());
        bytes = *parsed;
      } else if (v.is_number() || v.is_bool()) {
        bytes = v.is_bool() ? v.as_bool() : v.as_float();
      } else {
        fail("float() argument must be a string or a real number, not '", v.type_name(), "'");
      }
      const bool binary = bool_param(a, "binary", 0, false);
      const double base = binary ? 1024 : 1000;
      static const char* const kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
      static const char* const kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
      if (bytes == 1) return Value("1 Byte");
      if (bytes < base) return Value(std::to_string(float_to_int(bytes)) + " Bytes");
      double unit = base;
      for (int i = 0; i < 8; ++i) {
        unit = std::pow(base, i + 2);
        if (bytes < unit || i == 7) {
          char text[64];
          std::snprintf(text, sizeof text, "%.1f %s", base * bytes / unit, binary ? kBinary[i] : kDecimal[i]);
          return Value(text);
        }
      }
      return Value("");
    };
    f["pprint"] = [](const Value& v, const CallArgs&) { return Value(pformat(v)); };
    f["striptags"] = [](const Value& v, const CallArgs&) { return do_striptags(v); };
    return f;
  }();
  return table;
}

}  // namespace

Value apply_filter(std::string_view name, const Value& target, const CallArgs& args) {
  const auto& table = filters();
  const auto it = table.find(name);
  if (it == table.end()) fail("No filter named '", name, "'.");
  return it->second(target, args);
}

bool has_filter(std::string_view name) { return filters().count(name) != 0; }

}  // namespace corvid::jinja
