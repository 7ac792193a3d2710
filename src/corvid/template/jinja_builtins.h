// jinja2's built-in filters and tests, and the Python methods templates call
// on str, list and dict values, with transformers' overrides (tojson keeps
// non-ASCII text and does not HTML-escape). Errors are corvid::Error with the
// Python/jinja2 message; the evaluator adds the template line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "corvid/template/jinja_value.h"

namespace corvid::jinja {

// {{ target | name(args) }}. Unknown filter: Error "no filter named 'name'".
Value apply_filter(std::string_view name, const Value& target, const CallArgs& args);
bool has_filter(std::string_view name);

// {{ target is name(args) }}. Unknown test: Error "no test named 'name'".
bool apply_test(std::string_view name, const Value& target, const CallArgs& args);
bool has_test(std::string_view name);

// obj.name as jinja2's sandboxed getattr: for dicts, a method (items, keys,
// values, get) else the key; for str and list, their methods (bound to obj,
// returned as a Function); otherwise Undefined. Mutating methods (list.append,
// dict.update, ...) are refused as the immutable sandbox refuses them.
Value get_attribute(const Value& obj, std::string_view name);
// obj[key]: dict key, list/str index (negative from the end); missing -> Undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] for lists and strings (absent bounds are Undefined/None).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's printf-style `format % args` (the `format` filter and the `%`
// operator on a str): args is one value, a list (tuple) or a dict for %(key)s.
// A Markup format escapes the text it inserts (the result is then Markup too).
std::string percent_format(const Value& format, const Value& args);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as
// transformers' tojson calls it. indent: None (one line), an int or a str.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  Value indent = Value::none();
  std::optional<std::string> item_separator;  // default: ", ", or "," when indented
  std::optional<std::string> key_separator;   // default: ": "
  bool sort_keys = false;
};
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace corvid::jinja
