// Python's text formatting and number parsing as templates reach them:
// str.format and format specs, printf-style `%`, int(text, base), float(text).
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {
namespace detail {
namespace {

// int() and float() read any Unicode decimal digit as its ASCII digit.
std::string ascii_digits(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  std::string out;
  for (char32_t c : unicode::decode(text)) {
    const int d = unicode::decimal_value(c);
    if (d >= 0) {
      out.push_back(static_cast<char>('0' + d));
    } else {
      unicode::append(out, c);
    }
  }
  return out;
}

std::string_view trim_python_space(std::string_view text) {
  const std::u32string cps = unicode::decode(text);
  std::size_t begin = 0;
  std::size_t end = cps.size();
  while (begin < end && unicode::is_space(cps[begin])) ++begin;
  while (end > begin && unicode::is_space(cps[end - 1])) --end;
  const std::size_t byte_begin = unicode::encode(std::u32string_view(cps).substr(0, begin)).size();
  const std::size_t byte_len = unicode::encode(std::u32string_view(cps).substr(begin, end - begin)).size();
  return text.substr(byte_begin, byte_len);
}

// Digits with single underscores between them (Python numeric literals);
// appends the digits without underscores to `out`.
bool digit_run(std::string_view text, std::size_t& i, int base, std::string& out, bool allow_leading_underscore) {
  auto digit_value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'z') return c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
    return 99;
  };
  bool any = false;
  bool after_underscore = false;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '_') {
      if (after_underscore || (!any && !allow_leading_underscore)) return false;
      after_underscore = true;
      ++i;
      continue;
    }
    if (digit_value(c) >= base) break;
    out.push_back(c);
    any = true;
    after_underscore = false;
    ++i;
  }
  return any && !after_underscore;
}

struct Spec {
  char32_t fill = ' ';
  char align = 0;  // < > ^ = or 0 (default)
  char sign = '-';
  bool alternate = false;
  std::int64_t width = -1;
  char grouping = 0;
  std::int64_t precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view spec) {
  Spec s;
  const std::u32string cps = unicode::decode(spec);
  std::size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    s.fill = cps[0];
    s.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    s.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) s.sign = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '#') s.alternate = true, ++i;
  if (i < cps.size() && cps[i] == '0') {
    if (!s.align) s.fill = '0', s.align = '=';
    ++i;
  }
  auto number = [&]() {
    std::int64_t n = -1;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
      n = (n < 0 ? 0 : n * 10) + (cps[i++] - '0');
      if (n > kMaxWidth) fail("Too many decimal digits in format string");
    }
    return n;
  };
  s.width = number();
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) s.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    s.precision = number();
    if (s.precision < 0) fail("Format specifier missing precision");
  }
  if (i < cps.size()) s.type = static_cast<char>(cps[i++]);
  if (i != cps.size()) fail("Invalid format specifier '", std::string(spec), "'");
  return s;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out.push_back(sep);
    out.push_back(digits[i]);
  }
  return out;
}

std::string aligned(std::string sign, std::string body, const Spec& s, char default_align) {
  const char align = s.align ? s.align : default_align;
  const auto n = static_cast<std::int64_t>(unicode::length(sign) + unicode::length(body));
  if (s.width <= n) return sign + body;
  std::string padding;
  const std::int64_t total = s.width - n;
  auto fill = [&](std::int64_t count) {
    std::string f;
    for (std::int64_t k = 0; k < count; ++k) unicode::append(f, s.fill);
    return f;
  };
  switch (align) {
    case '<':
      return sign + body + fill(total);
    case '^':
      return fill(total / 2) + sign + body + fill(total - total / 2);
    case '=':
      return sign + fill(total) + body;
    default:
      return fill(total) + sign + body;
  }
}

std::string c_format(const char* pattern, std::int64_t precision, double value) {
  const int p = static_cast<int>(precision);
  const int size = std::snprintf(nullptr, 0, pattern, p, value);
  std::string out(static_cast<std::size_t>(std::max(size, 0)) + 1, '\0');
  std::snprintf(out.data(), out.size(), pattern, p, value);
  out.resize(static_cast<std::size_t>(std::max(size, 0)));
  return out;
}

// Python's float format with a precision and no type: like 'g', but scientific
// from exponent p-1 on and always a digit after the point ('{:.3}'.format(100.0) == '1e+02').
std::string general_no_type(double d, std::int64_t p) {
  if (!std::isfinite(d)) return c_format("%.*g", p, d);
  const std::string sci = c_format("%.*e", p - 1, d);
  const std::size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  if (exponent < -4 || exponent >= p - 1) {
    std::string mantissa = sci.substr(0, e);
    if (mantissa.find('.') != std::string::npos) {
      mantissa.erase(mantissa.find_last_not_of('0') + 1);
      if (mantissa.back() == '.') mantissa.pop_back();
    }
    return mantissa + sci.substr(e);
  }
  std::string fixed = c_format("%.*f", p - 1 - exponent, d);
  if (fixed.find('.') == std::string::npos) return fixed + ".0";
  fixed.erase(fixed.find_last_not_of('0') + 1);
  if (fixed.back() == '.') fixed += "0";
  return fixed;
}

}  // namespace

std::optional<std::int64_t> parse_python_int(std::string_view original, int base) {
  const std::string converted = ascii_digits(original);
  std::string_view text = trim_python_space(converted);
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  auto has_prefix = [&](char lower) {
    return i + 1 < text.size() && text[i] == '0' && (text[i + 1] == lower || text[i + 1] == lower - 32);
  };
  bool prefixed = false;
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    prefixed = base != 10;
  } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) || (base == 2 && has_prefix('b'))) {
    prefixed = true;
  }
  if (base < 2 || base > 36) return std::nullopt;
  if (prefixed) i += 2;
  std::string digits;
  if (!digit_run(text, i, base, digits, prefixed) || i != text.size()) return std::nullopt;
  std::int64_t value = 0;
  for (char c : digits) {
    const int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    if (value > (INT64_MAX - d) / base) return std::nullopt;
    value = value * base + d;
  }
  return negative ? -value : value;
}

std::optional<double> parse_python_float(std::string_view original) {
  const std::string converted = ascii_digits(original);
  const std::string_view text = trim_python_space(converted);
  std::string lowered;
  for (char c : text) lowered.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  std::size_t i = 0;
  std::string clean;
  if (i < lowered.size() && (lowered[i] == '+' || lowered[i] == '-')) clean.push_back(lowered[i++]);
  const std::string_view rest = std::string_view(lowered).substr(i);
  if (rest == "inf" || rest == "infinity") return clean == "-" ? -INFINITY : INFINITY;
  if (rest == "nan") return NAN;
  bool mantissa = false;
  if (i < lowered.size() && lowered[i] != '.') {
    if (!digit_run(lowered, i, 10, clean, false)) return std::nullopt;
    mantissa = true;
  }
  if (i < lowered.size() && lowered[i] == '.') {
    clean.push_back('.');
    ++i;
    if (i < lowered.size() && lowered[i] >= '0' && lowered[i] <= '9') {
      if (!digit_run(lowered, i, 10, clean, false)) return std::nullopt;
      mantissa = true;
    }
  }
  if (!mantissa) return std::nullopt;
  if (i < lowered.size() && lowered[i] == 'e') {
    clean.push_back('e');
    ++i;
    if (i < lowered.size() && (lowered[i] == '+' || lowered[i] == '-')) clean.push_back(lowered[i++]);
    if (!digit_run(lowered, i, 10, clean, false)) return std::nullopt;
  }
  if (i != lowered.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

std::string format_spec(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return v.str();
  const Spec s = parse_spec(spec_text);
  if (v.is_string()) {
    if (s.type && s.type != 's') fail("Unknown format code '", s.type, "' for object of type 'str'");
    if (s.sign != '-') fail("Sign not allowed in string format specifier");
    if (s.align == '=') fail("'=' alignment not allowed in string format specifier");
    if (s.grouping) fail("Cannot specify '", s.grouping, "' with 's'.");
    std::string body = v.as_string();
    if (s.precision >= 0) {
      body = unicode::encode(std::u32string_view(unicode::decode(body)).substr(
          0, static_cast<std::size_t>(s.precision)));
    }
    return aligned("", body, s, '<');
  }
  const bool numeric = v.is_number() || v.is_bool();
  if (!numeric) fail("unsupported format string passed to ", v.type_name(), ".__format__");
  const bool integer_type = s.type == 'd' || s.type == 'b' || s.type == 'o' || s.type == 'x' || s.type == 'X' ||
                            s.type == 'c' || s.type == 'n';
  if (!v.is_float() && (integer_type || s.type == 0)) {
    if (s.precision >= 0) fail("Precision not allowed in integer format specifier");
    const std::int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
    if (s.type == 'c') {
      if (i < 0 || i > 0x10FFFF) fail("%c arg not in range(0x110000)");
      std::string ch;
      unicode::append(ch, static_cast<char32_t>(i));
      return aligned("", ch, s, '<');
    }
    const std::uint64_t magnitude = i < 0 ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    std::string digits;
    const int base = s.type == 'b' ? 2 : s.type == 'o' ? 8 : (s.type == 'x' || s.type == 'X') ? 16 : 10;
    std::uint64_t m = magnitude;
    do {
      digits.insert(digits.begin(), "0123456789abcdef"[m % base]);
      m /= base;
    } while (m);
    if (s.type == 'X') {
      for (char& c : digits) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    if (s.grouping) digits = group_digits(digits, s.grouping);
    if (s.alternate && base != 10) digits = std::string("0") + (s.type == 'X' ? 'X' : s.type) + digits;
    const std::string sign = i < 0 ? "-" : s.sign == '-' ? "" : std::string(1, s.sign);
    return aligned(sign, digits, s, '>');
  }
  if (integer_type) fail("Unknown format code '", s.type, "' for object of type 'float'");
  double d = v.is_bool() ? v.as_bool() : v.as_float();
  const bool negative = std::signbit(d) && !std::isnan(d);
  d = std::fabs(d);
  std::string body;
  const std::int64_t precision = s.precision < 0 ? 6 : s.precision;
  switch (s.type) {
    case 'f':
    case 'F':
      body = c_format(s.alternate ? "%#.*f" : "%.*f", precision, d);
      break;
    case 'e':
    case 'E':
      body = c_format(s.alternate ? "%#.*e" : "%.*e", precision, d);
      break;
    case 'g':
    case 'G':
      body = c_format(s.alternate ? "%#.*g" : "%.*g", precision == 0 ? 1 : precision, d);
      break;
    case '%':
      body = c_format("%.*f", precision, d * 100) + "%";
      break;
    default:  // no type: repr, or 'g' with at least one digit after the point
      if (s.precision < 0) {
        body = python_float_repr(d);
      } else {
        body = general_no_type(d, precision == 0 ? 1 : precision);
      }
  }
  if (std::isinf(d)) body = s.type && std::isupper(static_cast<unsigned char>(s.type)) ? "INF" : "inf";
  if (std::isnan(d)) body = s.type && std::isupper(static_cast<unsigned char>(s.type)) ? "NAN" : "nan";
  if (s.type == 'E' || s.type == 'G' || s.type == 'F') {
    for (char& c : body) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (s.grouping) {
    const std::size_t int_end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, int_end), s.grouping) +
           (int_end == std::string::npos ? "" : body.substr(int_end));
  }
  const std::string sign = negative ? "-" : s.sign == '-' ? "" : std::string(1, s.sign);
  return aligned(sign, body, s, '>');
}

std::string python_format(std::string_view format, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  bool used_auto = false;
  bool used_manual = false;
  std::size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    // A replacement field; the spec may hold nested {fields}.
    std::size_t depth = 1;
    std::size_t j = i + 1;
    while (j < format.size() && depth) {
      if (format[j] == '{') ++depth;
      if (format[j] == '}') --depth;
      if (depth) ++j;
    }
    if (j >= format.size()) fail("expected '}' before end of string");
    const std::string_view field = format.substr(i + 1, j - i - 1);
    i = j + 1;
    std::size_t name_end = field.find_first_of("!:");
    const std::string_view name_part = field.substr(0, name_end);
    char conversion = 0;
    std::string spec;
    if (name_end != std::string_view::npos) {
      std::size_t spec_start = name_end;
      if (field[name_end] == '!') {
        if (name_end + 1 >= field.size()) fail("end of string while looking for conversion specifier");
        conversion = field[name_end + 1];
        spec_start = name_end + 2;
        if (spec_start < field.size() && field[spec_start] != ':') fail("expected ':' after conversion specifier");
      }
      if (spec_start < field.size()) spec = python_format(field.substr(spec_start + 1), args);
    }
    // The argument: a name or index, then .attr / [key] steps.
    const std::size_t first_step = name_part.find_first_of(".[");
    const std::string_view head = name_part.substr(0, first_step);
    Value value;
    bool head_digits = !head.empty();
    for (char d : head) head_digits = head_digits && d >= '0' && d <= '9';
    if (head.empty() || head_digits) {
      std::size_t index = 0;
      if (head.empty()) {
        if (used_manual) fail("cannot switch from manual field specification to automatic field numbering");
        used_auto = true;
        index = auto_index++;
      } else {
        if (used_auto) fail("cannot switch from automatic field numbering to manual field specification");
        used_manual = true;
        const auto parsed = parse_python_int(head, 10);
        if (!parsed) fail("Too many decimal digits in format string");
        index = static_cast<std::size_t>(*parsed);
      }
      if (index >= args.positional.size()) {
        fail("tuple index out of range");  // jinja2's sandboxed formatter indexes args directly
      }
      value = args.positional[index];
    } else {
      const Value* found = nullptr;
      for (const auto& [key, v] : args.keyword) {
        if (key == head) found = &v;
      }
      if (!found) fail(python_string_repr(head));
      value = *found;
    }
    std::size_t k = first_step;
    while (k != std::string_view::npos && k < name_part.size()) {
      if (name_part[k] == '.') {
        const std::size_t end = name_part.find_first_of(".[", k + 1);
        value = get_attribute(value, name_part.substr(k + 1, end == std::string_view::npos ? end : end - k - 1));
        k = end;
      } else {
        const std::size_t end = name_part.find(']', k);
        if (end == std::string_view::npos) fail("Missing ']' in format string");
        const std::string key(name_part.substr(k + 1, end - k - 1));
        const auto number = parse_python_int(key, 10);
        value = get_item(value, number && !key.empty() && key[0] != ' ' ? Value(*number) : Value(key));
        k = end + 1;
      }
    }
    if (value.is_undefined()) fail(value.undefined_message());
    if (conversion == 'r' || conversion == 'a') {
      value = Value(value.repr());
    } else if (conversion == 's') {
      value = Value(value.str());
    } else if (conversion) {
      fail("Unknown conversion specifier ", std::string(1, conversion));
    }
    out += format_spec(value, spec);
  }
  return out;
}

}  // namespace detail

std::string percent_format(const Value& format, const Value& args) {
  if (!format.is_string()) fail("unsupported operand type(s) for %: '", format.type_name(), "' and '", args.type_name(), "'");
  const std::string& f = format.as_string();
  const bool mapping = args.is_object() && !args.as_object().is_namespace;
  std::vector<Value> values = args.is_array() ? args.as_array() : std::vector<Value>{args};
  std::size_t next = 0;
  bool used_mapping = false;
  std::string out;
  auto take = [&]() -> Value {
    if (next >= values.size()) fail("not enough arguments for format string");
    return values[next++];
  };
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.push_back(f[i]);
      continue;
    }
    if (++i >= f.size()) fail("incomplete format");
    Value value;
    bool have_value = false;
    if (f[i] == '(') {
      const std::size_t close = f.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      const std::string key = f.substr(i + 1, close - i - 1);
      const Value* found = args.as_object().find(key);
      if (!found) fail(python_string_repr(key));
      value = *found;
      have_value = used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) flags.push_back(f[i++]);
    std::string width;
    if (i < f.size() && f[i] == '*') {
      width = std::to_string(detail::int_arg(take(), "*"));
      ++i;
    }
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') width.push_back(f[i++]);
    if (width.size() > 9) fail("width too big");
    std::string precision;
    bool has_precision = false;
    if (i < f.size() && f[i] == '.') {
      has_precision = true;
      ++i;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') precision.push_back(f[i++]);
      if (precision.size() > 9) fail("precision too big");
    }
    if (i >= f.size()) fail("incomplete format");
    const char type = f[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_value) value = take();
    // Translate to a str.format spec, which follows the same rules here.
    char align = flags.find('-') != std::string::npos ? '<' : '>';
    std::string spec;
    const bool zero = flags.find('0') != std::string::npos && align == '>';
    std::string body;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        body = type == 's' ? value.str() : value.repr();
        if (format.is_markup() && !value.is_markup()) body = detail::html_escape(body);  // Markup.__mod__
        if (has_precision) {
          body = unicode::encode(std::u32string_view(unicode::decode(body)).substr(
              0, static_cast<std::size_t>(precision.empty() ? 0 : detail::checked_width(*detail::parse_python_int(
                                                                        precision.substr(0, 9), 10)))));
        }
        spec = std::string(1, align) + width;
        out += detail::format_spec(Value(body), spec);
        continue;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!value.is_number() && !value.is_bool()) {
          fail("%", type, " format: ", (type == 'x' || type == 'X' || type == 'o') ? "an integer" : "a real number",
               " is required, not ", value.type_name());
        }
        if (value.is_float()) {
          if (type == 'x' || type == 'X' || type == 'o') {
            fail("%", type, " format: an integer is required, not float");
          }
          if (!std::isfinite(value.as_float())) fail("cannot convert float ", value.repr(), " to integer");
          const double whole = std::trunc(value.as_float());
          if (std::fabs(whole) >= 9223372036854775808.0) {  // Python's int is unbounded: print all digits
            char buf[400];  // DBL_MAX has 309 digits
            std::snprintf(buf, sizeof buf, "%.0f", whole);
            std::string digits = buf;
            if (whole >= 0 && flags.find('+') != std::string::npos) digits = "+" + digits;
            else if (whole >= 0 && flags.find(' ') != std::string::npos) digits = " " + digits;
            out += detail::format_spec(Value(digits), std::string(1, align) + width);
            continue;
          }
          value = Value(static_cast<std::int64_t>(whole));
        }
        const char t = (type == 'i' || type == 'u') ? 'd' : type;
        for (char fl : flags) {
          if (fl == '+' || fl == ' ') spec.push_back(fl);
        }
        if (flags.find('#') != std::string::npos && t != 'd') spec.push_back('#');
        spec = (zero ? std::string() : std::string(1, align)) + spec + (zero ? "0" : "") + width + t;
        out += detail::format_spec(value, spec);
        continue;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!value.is_number() && !value.is_bool()) fail("must be real number, not ", value.type_name());
        for (char fl : flags) {
          if (fl == '+' || fl == ' ') spec.push_back(fl);
        }
        if (flags.find('#') != std::string::npos) spec.push_back('#');
        spec = (zero ? std::string() : std::string(1, align)) + spec + (zero ? "0" : "") + width + "." +
               (has_precision ? (precision.empty() ? "0" : precision) : "6") + type;
        out += detail::format_spec(Value(value.is_bool() ? (value.as_bool() ? 1.0 : 0.0) : value.as_float()), spec);
        continue;
      }
      case 'c':
        if (!value.is_string() && !value.is_int() && !value.is_bool()) fail("%c requires int or char");
        if (value.is_string()) {
          if (unicode::length(value.as_string()) != 1) fail("%c requires int or char");
          out += value.as_string();
        } else {
          const std::int64_t code = detail::int_arg(value, "%c");
          if (code < 0 || code > 0x10FFFF) fail("%c arg not in range(0x110000)");
          unicode::append(out, static_cast<char32_t>(code));
        }
        continue;
      default:
        fail("unsupported format character '", std::string(1, type), "' (0x", std::hex, static_cast<int>(type), ") at index ", std::dec, i);
    }
  }
  if (!used_mapping && !mapping && next < values.size()) {
    fail("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace corvid::jinja
