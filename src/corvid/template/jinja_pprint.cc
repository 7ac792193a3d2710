// Python's pprint.pformat(value) (width 80, indent 1, dict keys sorted) for
// the `pprint` filter: the repr when it fits, else lists, tuples and dicts one
// item per line and long strings split into adjacent literals.
#include <algorithm>

#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja::detail {
namespace {

constexpr std::int64_t kWidth = 80;

std::int64_t text_length(const std::string& s) { return static_cast<std::int64_t>(unicode::length(s)); }

std::vector<std::pair<std::string, const Value*>> sorted_entries(const Object& object) {
  std::vector<std::pair<std::string, const Value*>> entries;
  for (const auto& [key, value] : object.entries) entries.emplace_back(key, value.get());
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return dict_key_less(a.first, b.first); });
  return entries;
}

// pprint's _safe_repr: repr() with every dict's keys sorted.
std::string sorted_repr(const Value& v) {
  if (v.is_object() && !v.as_object().is_namespace) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : sorted_entries(v.as_object())) {
      if (!first) out += ", ";
      first = false;
      out += dict_key_value(key).repr() + ": " + sorted_repr(*value);
    }
    return out + "}";
  }
  if (v.is_list() || v.is_tuple()) {
    std::string out = v.is_tuple() ? "(" : "[";
    const auto& items = v.as_array();
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += ", ";
      out += sorted_repr(items[i]);
    }
    if (v.is_tuple()) return out + (items.size() == 1 ? ",)" : ")");
    return out + "]";
  }
  return v.repr();
}

struct Printer {
  std::string out;

  void new_line(const char* separator, std::int64_t indent) {
    out += separator;
    out.append(static_cast<std::size_t>(indent), ' ');
  }

  void format(const Value& v, std::int64_t indent, std::int64_t allowance, int level) {
    const std::string rep = sorted_repr(v);
    if (text_length(rep) > kWidth - indent - allowance) {
      if (v.is_object() && !v.as_object().is_namespace) return print_dict(v.as_object(), indent, allowance, level + 1);
      if (v.is_list() || v.is_tuple()) return print_sequence(v, indent, allowance, level + 1);
      if (v.is_string() && !v.is_markup()) return print_string(v.as_string(), indent, allowance, level + 1);
    }
    out += rep;
  }

  void print_dict(const Object& object, std::int64_t indent, std::int64_t allowance, int level) {
    out += "{";
    const auto entries = sorted_entries(object);
    indent += 1;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const bool last = i + 1 == entries.size();
      const std::string key = dict_key_value(entries[i].first).repr();
      out += key + ": ";
      format(*entries[i].second, indent + text_length(key) + 2, last ? allowance + 1 : 1, level);
      if (!last) new_line(",\n", indent);
    }
    out += "}";
  }

  void print_sequence(const Value& v, std::int64_t indent, std::int64_t allowance, int level) {
    const auto& items = v.as_array();
    const std::string close = v.is_tuple() ? (items.size() == 1 ? ",)" : ")") : "]";
    out += v.is_tuple() ? "(" : "[";
    allowance += static_cast<std::int64_t>(close.size());
    indent += 1;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const bool last = i + 1 == items.size();
      if (i) new_line(",\n", indent);
      format(items[i], indent, last ? allowance : 1, level);
    }
    out += close;
  }

  // Splits each line at whitespace boundaries into literals that fit.
  void print_string(const std::string& s, std::int64_t indent, std::int64_t allowance, int level) {
    if (level == 1) indent += 1, allowance += 1;
    const std::vector<std::string> lines = splitlines(s, true);
    std::vector<std::string> chunks;
    std::string last_rep;
    const std::int64_t max_width = kWidth - indent;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const bool last_line = i + 1 == lines.size();
      last_rep = python_string_repr(lines[i]);
      if (text_length(last_rep) <= max_width - (last_line ? allowance : 0)) {
        chunks.push_back(last_rep);
        continue;
      }
      // re.findall(r'\S*\s*', line) without its final empty match.
      std::vector<std::string> parts;
      const std::u32string text = unicode::decode(lines[i]);
      std::size_t k = 0;
      while (k < text.size()) {
        std::size_t j = k;
        while (j < text.size() && !unicode::is_space(text[j])) ++j;
        while (j < text.size() && unicode::is_space(text[j])) ++j;
        parts.push_back(unicode::encode(std::u32string_view(text).substr(k, j - k)));
        k = j;
      }
      std::string current;
      for (std::size_t j = 0; j < parts.size(); ++j) {
        const std::string candidate = current + parts[j];
        const std::int64_t limit = max_width - (j + 1 == parts.size() && last_line ? allowance : 0);
        if (text_length(python_string_repr(candidate)) > limit) {
          if (!current.empty()) chunks.push_back(python_string_repr(current));
          current = parts[j];
        } else {
          current = candidate;
        }
      }
      if (!current.empty()) chunks.push_back(python_string_repr(current));
    }
    if (chunks.size() == 1) {
      out += last_rep;
      return;
    }
    if (level == 1) out += "(";
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      if (i) new_line("\n", indent);
      out += chunks[i];
    }
    if (level == 1) out += ")";
  }
};

}  // namespace

std::string pformat(const Value& value) {
  Printer printer;
  printer.format(value, 0, 0, 0);
  return printer.out;
}

}  // namespace corvid::jinja::detail
