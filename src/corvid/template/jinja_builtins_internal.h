// Helpers shared by the filter, test and method implementations
// (jinja_builtins.cc, jinja_filters.cc, jinja_methods.cc); not for the evaluator.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/template/jinja_value.h"

namespace corvid::jinja::detail {

// Python iter(): a list's items, a str's characters, a dict's keys; Undefined
// iterates as empty (jinja2's Undefined). Anything else: "'int' object is not iterable".
std::vector<Value> iterate(const Value& v);

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then index 0 (digits
// become integers), each step as environment.getitem.
Value lookup_attribute_path(const Value& item, const Value& attribute);

// str.strip family: `chars` absent/None strips Python whitespace.
std::string strip(std::string_view s, const Value* chars, bool left, bool right);
// str.split / str.rsplit with Python semantics (sep None: runs of whitespace).
std::vector<std::string> split(std::string_view s, const Value* sep, std::int64_t maxsplit, bool from_right);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                    std::int64_t count);
// str.center(width, fill).
std::string center(std::string_view s, std::int64_t width, char32_t fill);
// str.splitlines(keepends).
std::vector<std::string> splitlines(std::string_view s, bool keepends);

// Python int(text, base) for a str; nullopt where Python raises ValueError.
std::optional<std::int64_t> parse_python_int(std::string_view text, int base);
// Python float(text); nullopt where Python raises ValueError.
std::optional<double> parse_python_float(std::string_view text);

// Python str.format (positional {} {0} and keyword {name}, format specs).
std::string python_format(std::string_view format, const CallArgs& args);
// One value formatted with a format spec ("", ">10", ".2f", "03d", ...).
std::string format_spec(const Value& v, std::string_view spec);

// The str/list/dict method `name` bound to `obj`; nullopt if `obj` has no
// such method. A mutating method yields the Undefined whose use raises the
// sandbox's SecurityError message.
std::optional<Value> bound_method(const Value& obj, std::string_view name);

// Python's a <op> b for op in < <= > >=, with Python's TypeError text for
// unorderable operands ("'<' not supported between instances of 'str' and 'int'").
bool compare(std::string_view op, const Value& a, const Value& b);

// A filter/method argument: keyword `name` or positional `index`; an
// Undefined argument counts as absent.
inline const Value* optional_arg(const CallArgs& a, std::string_view name, std::size_t index) {
  const Value* v = a.get(name, index);
  return v && !v->is_undefined() ? v : nullptr;
}
inline bool bool_param(const CallArgs& a, std::string_view name, std::size_t index, bool fallback) {
  const Value* v = optional_arg(a, name, index);
  return v ? v->truthy() : fallback;
}
std::int64_t int_param(const CallArgs& a, std::string_view name, std::size_t index, std::int64_t fallback);
// jinja2's ignore_case: lowercases strings, leaves other values alone.
Value ignore_case(const Value& v);
// (key, value) of a dict entry (key as Object stores it).
inline Value tuple_pair(const std::string& key, const Value& value) { return Value::tuple({dict_key_value(key), value}); }
inline Value generator(std::vector<Value> items) { return Value::iterator(std::move(items), "generator"); }

// Filters over sequences (jinja_filters_seq.cc).
Value select_items(const Value& target, const CallArgs& args, bool keep_when, bool by_attribute);
Value map_items(const Value& target, const CallArgs& args);
Value min_or_max(const Value& target, const CallArgs& args, bool want_max);
Value do_sort(const Value& v, const CallArgs& args);
Value do_dictsort(const Value& v, const CallArgs& args);
Value do_unique(const Value& v, const CallArgs& args);
Value do_batch_or_slice(const Value& v, const CallArgs& args, bool batch);
Value do_groupby(const Value& v, const CallArgs& args);

// Python's pprint.pformat (jinja_pprint.cc).
std::string pformat(const Value& value);

// markupsafe's escape: & < > " ' become &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(std::string_view s);

// Padding widths, repeat counts and precisions above this fail instead of
// allocating without bound (the rendered output is capped far below anyway).
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 24;
std::int64_t checked_width(std::int64_t width);

// An int argument (bool counts), or fail with Python's message naming `what`.
std::int64_t int_arg(const Value& v, std::string_view what);

}  // namespace corvid::jinja::detail
