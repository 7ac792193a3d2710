// json.dumps as transformers' tojson calls it: Python's separators, indent
// (int or str), sort_keys and ensure_ascii, floats as Python's repr.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {
namespace {

using detail::int_arg;

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : unicode::decode(s)) {
    char esc[16];
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        std::snprintf(esc, sizeof esc, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      }
      out += esc;
    } else {
      unicode::append(out, c);
    }
  }
  out.push_back('"');
}

struct JsonWriter {
  const JsonDumpOptions& options;
  std::string indent_unit;
  bool indented = false;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void newline(int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += indent_unit;
  }

  void write(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += python_float_repr(d);
        return;
      }
      case Value::Kind::String: json_string(out, v.as_string(), options.ensure_ascii); return;
      case Value::Kind::Array: {
        if (v.is_iterator() || v.is_view()) break;
        const auto& items = v.as_array();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indented) newline(level);
        out.push_back(']');
        return;
      }
      case Value::Kind::Object: {
        if (v.as_object().is_namespace) break;
        auto entries = v.as_object().entries;
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (options.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return dict_key_less(a.first, b.first); });
        }
        out.push_back('{');
        for (std::size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          json_string(out, dict_key_json_text(entries[i].first), options.ensure_ascii);
          out += key_sep;
          write(*entries[i].second, level + 1);
        }
        if (indented) newline(level);
        out.push_back('}');
        return;
      }
      default:
        break;
    }
    fail("Object of type ", v.type_name(), " is not JSON serializable");
  }
};

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer{options, {}, false, {}, {}, {}};
  if (options.indent.is_string()) {
    writer.indented = true;
    writer.indent_unit = options.indent.as_string();
  } else if (!options.indent.is_none() && !options.indent.is_undefined()) {
    writer.indented = true;
    writer.indent_unit = std::string(
        static_cast<std::size_t>(std::max<std::int64_t>(0, detail::checked_width(int_arg(options.indent, "indent")))), ' ');
  }
  writer.item_sep = options.item_separator.value_or(writer.indented ? "," : ", ");
  writer.key_sep = options.key_separator.value_or(": ");
  writer.write(value, 0);
  return writer.out;
}

}  // namespace corvid::jinja
