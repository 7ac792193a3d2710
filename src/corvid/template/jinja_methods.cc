// The Python methods templates call on str, list and dict values
// ('a,b'.split(','), d.get('k', 1), ...), bound to their object. The sandbox
// is immutable: mutating methods exist but are refused when used.
#include <algorithm>
#include <unordered_set>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja::detail {
namespace {

const Value* arg(const CallArgs& a, std::string_view name, std::size_t index) {
  const Value* v = a.get(name, index);
  return v && !v->is_undefined() ? v : nullptr;
}

const std::string& str_arg(const Value* v, std::string_view method) {
  if (!v) fail(method, "() takes at least 1 argument (0 given)");
  if (!v->is_string()) fail("must be str, not ", v->type_name());
  return v->as_string();
}

std::size_t code_point_index(std::string_view s, std::size_t byte_pos) {
  return unicode::length(s.substr(0, byte_pos));
}

// Python's str[start:end] window for find/count/startswith, as byte offsets;
// nullopt when start lies past end (CPython then finds nothing, not even "").
std::optional<std::pair<std::size_t, std::size_t>> byte_range(std::string_view s, const Value* start,
                                                              const Value* end) {
  if ((!start || start->is_none()) && (!end || end->is_none())) return std::pair{std::size_t{0}, s.size()};
  const std::u32string text = unicode::decode(s);
  const auto n = static_cast<std::int64_t>(text.size());
  auto adjust = [&](const Value* v, std::int64_t fallback) {
    if (!v || v->is_none()) return fallback;
    std::int64_t i = int_arg(*v, "slice");
    if (i < 0) i = std::max<std::int64_t>(0, i + n);
    return i;
  };
  const std::int64_t from = adjust(start, 0);
  const std::int64_t to = std::min(adjust(end, n), n);
  if (from > to) return std::nullopt;
  return std::pair{unicode::encode(std::u32string_view(text).substr(0, static_cast<std::size_t>(from))).size(),
                   unicode::encode(std::u32string_view(text).substr(0, static_cast<std::size_t>(to))).size()};
}

std::vector<std::string> prefix_list(const Value* v, std::string_view method) {
  if (v && v->is_string()) return {v->as_string()};
  if (v && v->is_array()) {
    std::vector<std::string> out;
    for (const Value& item : v->as_array()) {
      if (!item.is_string()) {
        fail("tuple for ", method, " must only contain str, not ", item.type_name());
      }
      out.push_back(item.as_string());
    }
    return out;
  }
  fail(method, " first arg must be str or a tuple of str, not ", v ? v->type_name() : "nothing");
}

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::array(std::move(out));
}

template <class Pred>
Value all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return Value(false);
  for (char32_t c : unicode::decode(s)) {
    if (!pred(c)) return Value(false);
  }
  return Value(true);
}

std::string pad(std::string_view s, std::int64_t width, char32_t fill, char align) {
  checked_width(width);
  const auto n = static_cast<std::int64_t>(unicode::length(s));
  if (width <= n) return std::string(s);
  if (align == '^') return center(s, width, fill);
  std::string padding;
  for (std::int64_t i = 0; i < width - n; ++i) unicode::append(padding, fill);
  return align == '<' ? std::string(s) + padding : padding + std::string(s);
}

char32_t fill_arg(const Value* v) {
  if (!v) return ' ';
  if (!v->is_string() || unicode::length(v->as_string()) != 1) {
    fail("The fill character must be exactly one character long");
  }
  return unicode::decode(v->as_string())[0];
}

std::int64_t find(const std::string& s, const CallArgs& a, bool from_right) {
  const std::string& sub = str_arg(arg(a, "sub", 0), from_right ? "rfind" : "find");
  const auto range = byte_range(s, arg(a, "start", 1), arg(a, "end", 2));
  if (!range) return -1;
  const auto [from, to] = *range;
  const std::string_view window = std::string_view(s).substr(from, to - from);
  const std::size_t pos = from_right ? window.rfind(sub) : window.find(sub);
  if (pos == std::string_view::npos) return -1;
  return static_cast<std::int64_t>(code_point_index(s, from + pos));
}

Value str_method(const std::string& s, std::string_view name, const CallArgs& a) {
  if (name == "upper") return Value(unicode::upper(s));
  if (name == "lower") return Value(unicode::lower(s));
  if (name == "casefold") return Value(unicode::casefold(s));
  if (name == "swapcase") return Value(unicode::swapcase(s));
  if (name == "isascii") {
    for (char c : s) {
      if (static_cast<unsigned char>(c) >= 0x80) return Value(false);
    }
    return Value(true);
  }
  if (name == "isprintable") {
    for (char32_t c : unicode::decode(s)) {
      if (!unicode::is_printable(c)) return Value(false);
    }
    return Value(true);
  }
  if (name == "istitle") {
    bool cased = false;
    bool previous_cased = false;
    for (char32_t c : unicode::decode(s)) {
      if (unicode::is_upper(c) || unicode::is_titlecase(c)) {
        if (previous_cased) return Value(false);
        previous_cased = cased = true;
      } else if (unicode::is_lower(c)) {
        if (!previous_cased) return Value(false);
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return Value(cased);
  }
  if (name == "expandtabs") {
    const Value* size = arg(a, "tabsize", 0);
    const std::int64_t tab = size ? checked_width(int_arg(*size, "tabsize")) : 8;
    std::string out;
    std::int64_t column = 0;
    for (char32_t c : unicode::decode(s)) {
      if (c == '\t') {
        if (tab > 0) {
          const std::int64_t spaces = tab - column % tab;
          out.append(static_cast<std::size_t>(spaces), ' ');
          column += spaces;
        }
      } else {
        unicode::append(out, c);
        column = (c == '\n' || c == '\r') ? 0 : column + 1;
      }
    }
    return Value(out);
  }
  if (name == "format_map") {
    const Value* mapping = arg(a, "mapping", 0);
    if (!mapping || !mapping->is_object()) fail("format_map() argument must be a mapping");
    CallArgs keywords;
    for (const auto& [key, value] : mapping->as_object().entries) keywords.keyword.emplace_back(key, *value);
    return Value(python_format(s, keywords));
  }
  if (name == "title") return Value(unicode::title(s));
  if (name == "capitalize") return Value(unicode::capitalize(s));
  if (name == "strip") return Value(strip(s, arg(a, "chars", 0), true, true));
  if (name == "lstrip") return Value(strip(s, arg(a, "chars", 0), true, false));
  if (name == "rstrip") return Value(strip(s, arg(a, "chars", 0), false, true));
  if (name == "split" || name == "rsplit") {
    const Value* maxsplit = arg(a, "maxsplit", 1);
    return strings(split(s, arg(a, "sep", 0), maxsplit ? int_arg(*maxsplit, "maxsplit") : -1, name == "rsplit"));
  }
  if (name == "splitlines") {
    const Value* keepends = arg(a, "keepends", 0);
    return strings(splitlines(s, keepends && keepends->truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    const auto range = byte_range(s, arg(a, "start", 1), arg(a, "end", 2));
    const std::vector<std::string> affixes = prefix_list(arg(a, "prefix", 0), name);
    if (!range) return Value(false);
    const std::string_view window = std::string_view(s).substr(range->first, range->second - range->first);
    for (const std::string& p : affixes) {
      if (starts ? window.starts_with(p) : window.ends_with(p)) return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    const Value* count = arg(a, "count", 2);
    return Value(replace(s, str_arg(arg(a, "old", 0), "replace"), str_arg(arg(a, "new", 1), "replace"),
                         count ? int_arg(*count, "count") : -1));
  }
  if (name == "find" || name == "rfind") return Value(find(s, a, name == "rfind"));
  if (name == "index" || name == "rindex") {
    const std::int64_t at = find(s, a, name == "rindex");
    if (at < 0) fail("substring not found");
    return Value(at);
  }
  if (name == "count") {
    const std::string& sub = str_arg(arg(a, "sub", 0), "count");
    const auto range = byte_range(s, arg(a, "start", 1), arg(a, "end", 2));
    if (!range) return Value(0);
    const std::string_view window = std::string_view(s).substr(range->first, range->second - range->first);
    if (sub.empty()) return Value(static_cast<std::int64_t>(unicode::length(window) + 1));
    std::int64_t n = 0;
    for (std::size_t pos = window.find(sub); pos != std::string_view::npos; pos = window.find(sub, pos + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* items = arg(a, "iterable", 0);
    if (!items) fail("join() takes exactly one argument (0 given)");
    std::string out;
    std::size_t index = 0;
    for (const Value& item : iterate(*items)) {
      if (!item.is_string()) {
        fail("sequence item ", index, ": expected str instance, ", item.type_name(), " found");
      }
      if (index++) out += s;
      out += item.as_string();
    }
    return Value(out);
  }
  if (name == "format") return Value(python_format(s, a));
  if (name == "isdigit") return all_chars(s, unicode::is_digit);
  if (name == "isdecimal") return all_chars(s, unicode::is_decimal);
  if (name == "isnumeric") return all_chars(s, unicode::is_numeric);
  if (name == "isalpha") return all_chars(s, unicode::is_alpha);
  if (name == "isspace") return all_chars(s, unicode::is_space);
  if (name == "isalnum") {
    return all_chars(s, [](char32_t c) { return unicode::is_alpha(c) || unicode::is_numeric(c); });
  }
  if (name == "isupper" || name == "islower") {
    bool any_cased = false;
    for (char32_t c : unicode::decode(s)) {
      if (name == "isupper" ? unicode::is_lower(c) : unicode::is_upper(c)) return Value(false);
      if (unicode::is_cased(c) && !(name == "isupper" ? unicode::is_upper(c) : unicode::is_lower(c))) {
        return Value(false);  // titlecase letters
      }
      any_cased = any_cased || unicode::is_cased(c);
    }
    return Value(any_cased);
  }
  if (name == "zfill") {
    const Value* width = arg(a, "width", 0);
    if (!width) fail("zfill() takes exactly one argument (0 given)");
    const auto w = checked_width(int_arg(*width, "width"));
    const auto n = static_cast<std::int64_t>(unicode::length(s));
    if (w <= n) return Value(s);
    const bool signed_text = !s.empty() && (s[0] == '+' || s[0] == '-');
    std::string out = signed_text ? s.substr(0, 1) : "";
    out += std::string(static_cast<std::size_t>(w - n), '0');
    out += signed_text ? s.substr(1) : s;
    return Value(out);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const Value* width = arg(a, "width", 0);
    if (!width) fail(name, "() takes at least 1 argument (0 given)");
    const char align = name == "center" ? '^' : name == "ljust" ? '<' : '>';
    return Value(pad(s, int_arg(*width, "width"), fill_arg(arg(a, "fillchar", 1)), align));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& affix = str_arg(arg(a, "prefix", 0), name);
    if (name == "removeprefix") return Value(s.starts_with(affix) ? s.substr(affix.size()) : s);
    return Value(s.ends_with(affix) ? s.substr(0, s.size() - affix.size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    const std::string& sep = str_arg(arg(a, "sep", 0), name);
    if (sep.empty()) fail("empty separator");
    const std::size_t pos = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (pos == std::string::npos) {
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    }
    return Value::tuple({Value(s.substr(0, pos)), Value(sep), Value(s.substr(pos + sep.size()))});
  }
  fail("'str' object has no attribute '", name, "'");
}

const std::unordered_set<std::string_view>& str_methods() {
  static const std::unordered_set<std::string_view> names = {
      "upper",     "lower",      "casefold",   "title",       "capitalize",   "strip",   "lstrip",
      "rstrip",    "split",      "rsplit",     "splitlines",  "startswith",   "endswith", "replace",
      "find",      "rfind",      "index",      "rindex",      "count",        "join",    "format",
      "isdigit",   "isdecimal",  "isnumeric",  "isalpha",     "isspace",      "isalnum", "isupper",
      "islower",   "zfill",      "center",     "ljust",       "rjust",        "removeprefix",
      "removesuffix", "partition", "rpartition", "swapcase", "isascii", "isprintable", "istitle",
      "expandtabs", "format_map"};
  return names;
}

Value list_method(const Value& list, std::string_view name, const CallArgs& a) {
  const auto& items = list.as_array();
  if (name == "copy") return Value::array(items);
  const Value* x = arg(a, "value", 0);
  if (!x) fail(name, "() takes exactly one argument (0 given)");
  if (name == "count") {
    return Value(static_cast<std::int64_t>(std::count(items.begin(), items.end(), *x)));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {  // index
    if (items[i] == *x) return Value(static_cast<std::int64_t>(i));
  }
  if (list.is_tuple()) fail("tuple.index(x): x not in tuple");
  fail(x->repr(), " is not in list");
}

Value dict_method(const Value& dict, std::string_view name, const CallArgs& a) {
  const Object& object = dict.as_object();
  std::vector<Value> out;
  if (name == "get") {
    const Value* key = arg(a, "key", 0);
    if (!key) fail("get expected at least 1 argument, got 0");
    const Value* fallback = arg(a, "default", 1);
    const Value* found = nullptr;
    found = object.find(dict_key(*key));  // unhashable: TypeError, as in Python
    if (found) return *found;
    return fallback ? *fallback : Value::none();
  }
  if (name == "copy") return Value::object(std::make_shared<Object>(object));
  for (const auto& [key, value] : object.entries) {
    if (name == "keys") out.push_back(dict_key_value(key));
    if (name == "values") out.push_back(*value);
    if (name == "items") out.push_back(Value::tuple({dict_key_value(key), *value}));
  }
  return Value::view(std::move(out), "dict_" + std::string(name));
}

bool is_mutator(const Value& obj, std::string_view name) {
  static const std::unordered_set<std::string_view> list_mutators = {
      "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", "__setitem__", "__delitem__"};
  static const std::unordered_set<std::string_view> dict_mutators = {"clear", "pop", "popitem", "setdefault",
                                                                     "update"};
  return obj.is_array() ? list_mutators.count(name) != 0 : dict_mutators.count(name) != 0;
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, std::string_view name) {
  const std::string method(name);
  if (obj.is_string()) {
    if (!str_methods().count(name)) return std::nullopt;
    return Value::function(method, [obj, method](const CallArgs& a) { return str_method(obj.as_string(), method, a); });
  }
  const bool is_dict = obj.is_object() && !obj.as_object().is_namespace;
  if (!obj.is_list() && !is_dict) {
    if (obj.is_tuple() && (name == "index" || name == "count")) {
      return Value::function(method, [obj, method](const CallArgs& a) { return list_method(obj, method, a); });
    }
    return std::nullopt;
  }
  if (is_mutator(obj, name)) {
    return Value::undefined_with_message("access to attribute '" + method + "' of '" + obj.type_name() +
                                         "' object is unsafe.");
  }
  if ((obj.is_list() && name == "copy") || ((obj.is_list() || obj.is_tuple()) && (name == "index" || name == "count"))) {
    return Value::function(method, [obj, method](const CallArgs& a) { return list_method(obj, method, a); });
  }
  if (is_dict && (name == "get" || name == "keys" || name == "values" || name == "items" || name == "copy")) {
    return Value::function(method, [obj, method](const CallArgs& a) { return dict_method(obj, method, a); });
  }
  return std::nullopt;
}

std::string strip(std::string_view s, const Value* chars, bool left, bool right) {
  const std::u32string text = unicode::decode(s);
  std::u32string set;
  const bool whitespace = !chars || chars->is_none() || chars->is_undefined();
  if (!whitespace) {
    if (!chars->is_string()) fail("strip arg must be None or str");
    set = unicode::decode(chars->as_string());
  }
  auto strippable = [&](char32_t c) {
    return whitespace ? unicode::is_space(c) : set.find(c) != std::u32string::npos;
  };
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (left && begin < end && strippable(text[begin])) ++begin;
  while (right && end > begin && strippable(text[end - 1])) --end;
  return unicode::encode(std::u32string_view(text).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const Value* sep, std::int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep && !sep->is_none() && !sep->is_undefined()) {
    if (!sep->is_string()) fail("must be str or None, not ", sep->type_name());
    const std::string& d = sep->as_string();
    if (d.empty()) fail("empty separator");
    if (!from_right) {
      std::size_t start = 0;
      while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
        const std::size_t pos = s.find(d, start);
        if (pos == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, pos - start));
        start = pos + d.size();
      }
      parts.emplace_back(s.substr(start));
      return parts;
    }
    std::size_t end = s.size();
    while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
      if (end < d.size()) break;
      const std::size_t pos = s.rfind(d, end - d.size());
      if (pos == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos + d.size(), end - pos - d.size()));
      end = pos;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // No separator: runs of whitespace split, leading/trailing whitespace ignored;
  // once maxsplit is reached the rest (stripped on the splitting side) is one part.
  std::u32string text = unicode::decode(s);
  if (from_right) std::reverse(text.begin(), text.end());
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && unicode::is_space(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
      std::size_t end = text.size();
      parts.push_back(unicode::encode(std::u32string_view(text).substr(i, end - i)));
      break;
    }
    std::size_t j = i;
    while (j < text.size() && !unicode::is_space(text[j])) ++j;
    parts.push_back(unicode::encode(std::u32string_view(text).substr(i, j - i)));
    i = j;
  }
  if (from_right) {
    for (auto& p : parts) {
      std::u32string t = unicode::decode(p);
      std::reverse(t.begin(), t.end());
      p = unicode::encode(t);
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text, std::int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    const std::u32string text = unicode::decode(s);
    std::int64_t done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) out += new_text, ++done;
      unicode::append(out, c);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  std::size_t start = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t pos = s.find(old_text, start);
    if (pos == std::string_view::npos) break;
    out += s.substr(start, pos - start);
    out += new_text;
    start = pos + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

std::string center(std::string_view s, std::int64_t width, char32_t fill) {
  checked_width(width);
  const auto n = static_cast<std::int64_t>(unicode::length(s));
  if (width <= n) return std::string(s);
  // CPython: left = marg/2 + (marg & width & 1).
  const std::int64_t marg = width - n;
  const std::int64_t left = marg / 2 + (marg & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) unicode::append(out, fill);
  out += s;
  for (std::int64_t i = 0; i < marg - left; ++i) unicode::append(out, fill);
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string text = unicode::decode(s);
  std::vector<std::string> lines;
  std::size_t start = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!unicode::is_line_break(text[i])) {
      ++i;
      continue;
    }
    std::size_t eol = i + 1;
    if (text[i] == '\r' && eol < text.size() && text[eol] == '\n') ++eol;
    const std::size_t end = keepends ? eol : i;
    lines.push_back(unicode::encode(std::u32string_view(text).substr(start, end - start)));
    start = i = eol;
  }
  if (start < text.size()) lines.push_back(unicode::encode(std::u32string_view(text).substr(start)));
  return lines;
}

}  // namespace corvid::jinja::detail
