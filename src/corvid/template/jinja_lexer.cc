#include "corvid/template/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "corvid/core/utf8.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {
namespace {

// Byte length of the whitespace character (Python's str.isspace, which is
// what jinja2's `\s` and rstrip() match) starting at `p`, or 0.
std::size_t space_at(std::string_view s, std::size_t p) {
  if (p >= s.size()) return 0;
  char32_t cp = 0;
  const std::size_t len = utf8::decode(s, p, &cp);
  return len && unicode::is_space(cp) ? len : 0;
}

// Byte length of the whitespace character that ends just before `end`, or 0.
std::size_t space_before(std::string_view s, std::size_t end) {
  for (std::size_t len = 1; len <= 3 && len <= end; ++len)
    if (space_at(s, end - len) == len) return len;
  return 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding, which jinja2 applies to string literals.
// Unknown escapes keep their backslash, as Python does.
std::string unescape(std::string_view raw, int line) {
  std::string out;
  std::uint32_t pending_high_surrogate = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) {
      out += c;
      continue;
    }
    char e = raw[++i];
    auto read_hex = [&](int digits, const char* what) {
      std::uint32_t value = 0;
      for (int k = 0; k < digits; ++k) {
        int h = i + 1 < raw.size() ? hex_value(raw[i + 1]) : -1;
        if (h < 0) throw TemplateError(line, std::string("truncated ") + what + " escape");
        value = value * 16 + static_cast<std::uint32_t>(h);
        ++i;
      }
      return value;
    };
    std::uint32_t cp = 0;
    switch (e) {
      case '\n': continue;
      case '\\': out += '\\'; continue;
      case '\'': out += '\''; continue;
      case '"': out += '"'; continue;
      case 'a': out += '\a'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case 'v': out += '\v'; continue;
      case 'x': cp = read_hex(2, "\\xXX"); break;
      case 'u': cp = read_hex(4, "\\uXXXX"); break;
      case 'U':
        cp = read_hex(8, "\\UXXXXXXXX");
        if (cp > 0x10FFFF) throw TemplateError(line, "illegal Unicode character");
        break;
      case 'N': throw TemplateError(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          cp = static_cast<std::uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<std::uint32_t>(raw[++i] - '0');
          break;
        }
        out += '\\';
        out += e;
        continue;
    }
    // A \uD83D\uDE00 pair is one character once Python prints it as UTF-8.
    if (cp >= 0xD800 && cp < 0xDC00) {
      if (pending_high_surrogate) utf8::append(out, pending_high_surrogate);
      pending_high_surrogate = cp;
      continue;
    }
    if (cp >= 0xDC00 && cp < 0xE000 && pending_high_surrogate) {
      cp = 0x10000 + ((pending_high_surrogate - 0xD800) << 10) + (cp - 0xDC00);
      pending_high_surrogate = 0;
    }
    utf8::append(out, cp);
  }
  if (pending_high_surrogate) utf8::append(out, pending_high_surrogate);
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const Options& options) : src_(std::move(source)), options_(options) {}

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      std::size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_text(pos, src_.substr(pos));
        break;
      }
      char type = src_[start + 1];
      std::size_t after = start + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      std::size_t raw_end = type == '%' ? match_raw_begin(after + (sign ? 1 : 0)) : std::string::npos;
      std::string text = src_.substr(pos, start - pos);
      strip_before_tag(text, sign, type != '{', line_starting);
      emit_text(pos, std::move(text));
      if (raw_end != std::string::npos) {
        pos = lex_raw_body(raw_end, line_starting);
      } else if (type == '#') {
        pos = lex_comment(start, after + (sign ? 1 : 0));
      } else {
        pos = lex_tag(start, after + (sign ? 1 : 0), type == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{TokenKind::End, {}, line_of(src_.size()), 0, 0});
    return std::move(tokens_);
  }

 private:
  int line_of(std::size_t pos) {
    // Positions only move forward, so count newlines incrementally.
    if (pos < counted_pos_) {
      counted_pos_ = 0;
      counted_line_ = 1;
    }
    for (; counted_pos_ < pos && counted_pos_ < src_.size(); ++counted_pos_)
      if (src_[counted_pos_] == '\n') ++counted_line_;
    return counted_line_;
  }

  [[noreturn]] void error(std::size_t pos, const std::string& message) {
    throw TemplateError(line_of(pos), message);
  }

  // jinja2's "unexpected char '@' at 12" (the position counts characters).
  [[noreturn]] void unexpected_char(std::size_t p) {
    const std::size_t chars = unicode::length(std::string_view(src_).substr(0, p));
    std::string message = "unexpected char ";
    message.append(src_[p] == '\'' ? "\"'\"" : "'" + std::string(1, src_[p]) + "'").append(" at ").append(std::to_string(chars));
    error(p, message);
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  std::size_t skip_space(std::size_t p) const {
    while (std::size_t n = space_at(src_, p)) p += n;
    return p;
  }

  bool at(std::size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // `{% raw %}` / `{%- raw -%}`: returns the position after the tag, or npos.
  std::size_t match_raw_begin(std::size_t p) const {
    p = skip_space(p);
    if (!at(p, "raw")) return std::string::npos;
    p = skip_space(p + 3);
    if (at(p, "-%}")) return skip_space(p + 3);
    if (at(p, "%}")) return p + 2;  // jinja2 applies no trim_blocks here
    return std::string::npos;
  }

  // The `-` marker strips all whitespace before a tag; lstrip_blocks strips the
  // spaces and tabs that start the tag's line (not for {{ }}), unless `+`.
  void strip_before_tag(std::string& text, char sign, bool lstrip_applies, bool line_starting) const {
    if (sign == '-') {
      std::size_t end = text.size();
      while (std::size_t n = space_before(text, end)) end -= n;
      text.resize(end);
    } else if (sign != '+' && options_.lstrip_blocks && lstrip_applies) {
      std::size_t nl = text.rfind('\n');
      std::size_t line_start = nl == std::string::npos ? 0 : nl + 1;
      if (line_start == 0 && !line_starting) return;
      if (line_start == text.size()) return;
      for (std::size_t i = line_start; i < text.size();) {
        std::size_t n = space_at(text, i);
        if (n == 0) return;
        i += n;
      }
      text.resize(line_start);
    }
  }

  // After a block or comment end: `-` strips following whitespace, `+` keeps
  // it, otherwise trim_blocks removes one newline.
  std::size_t after_block_end(std::size_t p, char marker) const {
    if (marker == '-') return skip_space(p);
    if (marker != '+' && options_.trim_blocks && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  void emit_text(std::size_t pos, std::string text) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenKind::Text, std::move(text), line_of(pos), 0, 0});
  }

  std::size_t lex_comment(std::size_t start, std::size_t body) {
    if (body >= src_.size()) return body;  // jinja2 lets a bare `{#` end the template
    std::size_t close = src_.find("#}", body);
    if (close == std::string::npos) error(start, "Missing end of comment tag");
    char marker = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_block_end(close + 2, marker);
  }

  std::size_t lex_raw_body(std::size_t body, bool& line_starting) {
    line_starting = body > 0 && src_[body - 1] == '\n';
    if (body >= src_.size()) return body;  // as jinja2, a `{% raw %}` that ends the template is empty
    for (std::size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      std::size_t q = p + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      q = skip_space(q + (sign ? 1 : 0));
      if (!at(q, "endraw")) continue;
      q = skip_space(q + 6);
      char marker = 0;
      if (at(q, "+%}") || at(q, "-%}")) {
        marker = src_[q];
        q += 3;
      } else if (at(q, "%}")) {
        q += 2;
      } else {
        continue;
      }
      std::string text = src_.substr(body, p - body);
      strip_before_tag(text, sign, true, line_starting);
      emit_text(body, std::move(text));
      return after_block_end(q, marker);
    }
    error(body, "Missing end of raw directive");
  }

  std::size_t lex_tag(std::size_t start, std::size_t p, bool block) {
    tokens_.push_back(Token{block ? TokenKind::BlockBegin : TokenKind::PrintBegin, {}, line_of(start), 0, 0});
    std::vector<char> balancing;
    while (true) {
      p = skip_space(p);
      if (p >= src_.size()) error(start, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (balancing.empty()) {
        if (block && (at(p, "-%}") || at(p, "+%}") || at(p, "%}"))) {
          char marker = src_[p] == '%' ? 0 : src_[p];
          tokens_.push_back(Token{TokenKind::BlockEnd, {}, line_of(p), 0, 0});
          return after_block_end(p + (marker ? 3 : 2), marker);
        }
        if (!block && at(p, "-}}")) {
          tokens_.push_back(Token{TokenKind::PrintEnd, {}, line_of(p), 0, 0});
          return skip_space(p + 3);
        }
        if (!block && at(p, "}}")) {
          tokens_.push_back(Token{TokenKind::PrintEnd, {}, line_of(p), 0, 0});
          return p + 2;
        }
      }
      p = lex_token(p, balancing);
    }
  }

  std::size_t digits(std::size_t p) const {  // (\d+_)*\d+ ; returns end or p
    std::size_t q = p;
    if (q >= src_.size() || !is_digit(src_[q])) return p;
    while (true) {
      while (q < src_.size() && is_digit(src_[q])) ++q;
      if (q + 1 < src_.size() && src_[q] == '_' && is_digit(src_[q + 1])) { ++q; continue; }
      return q;
    }
  }

  std::size_t match_float(std::size_t p) const {
    if (p > 0 && src_[p - 1] == '.') return p;
    std::size_t q = digits(p);
    if (q == p) return p;
    std::size_t frac = q;
    if (q < src_.size() && src_[q] == '.') {
      std::size_t f = digits(q + 1);
      if (f > q + 1) frac = f;
    }
    if (frac < src_.size() && (src_[frac] == 'e' || src_[frac] == 'E')) {
      std::size_t e = frac + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      std::size_t end = digits(e);
      if (end > e) return end;
    }
    return frac > q ? frac : p;
  }

  std::string without_underscores(std::size_t from, std::size_t to) const {
    std::string s;
    for (std::size_t i = from; i < to; ++i)
      if (src_[i] != '_') s += src_[i];
    return s;
  }

  std::size_t lex_token(std::size_t p, std::vector<char>& balancing) {
    int line = line_of(p);
    char c = src_[p];
    if (is_digit(c)) {
      std::size_t end = match_float(p);
      if (end > p) {
        tokens_.push_back(Token{TokenKind::Float, {}, line, 0, std::strtod(without_underscores(p, end).c_str(), nullptr)});
        return end;
      }
      int base = 10;
      std::size_t q = p;
      if (c == '0' && p + 1 < src_.size() && std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
        char b = static_cast<char>(src_[p + 1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        q = p + 2;
        while (q < src_.size() && (src_[q] == '_' || (hex_value(src_[q]) >= 0 && hex_value(src_[q]) < base))) ++q;
        if (q == p + 2) error(p, "invalid integer literal");
      } else if (c == '0') {
        q = p + 1;
        while (q + 1 < src_.size() && (src_[q] == '0' || (src_[q] == '_' && src_[q + 1] == '0'))) ++q;
      } else {
        q = digits(p);
      }
      std::string text = without_underscores(base == 10 ? p : p + 2, q);
      errno = 0;
      char* end_ptr = nullptr;
      long long value = std::strtoll(text.c_str(), &end_ptr, base);
      if (errno == ERANGE) error(p, "integer literal too large");
      tokens_.push_back(Token{TokenKind::Int, {}, line, static_cast<std::int64_t>(value), 0});
      return q;
    }
    // Names are Python identifiers; any non-ASCII character other than
    // whitespace is taken as part of one (é, 日本, ...).
    auto name_byte = [&](std::size_t i, bool first) {
      unsigned char b = static_cast<unsigned char>(src_[i]);
      return (first ? is_name_start(src_[i]) : is_name_char(src_[i])) || (b >= 0x80 && space_at(src_, i) == 0);
    };
    if (name_byte(p, true)) {
      std::size_t q = p;
      while (q < src_.size() && name_byte(q, false)) ++q;
      tokens_.push_back(Token{TokenKind::Name, src_.substr(p, q - p), line, 0, 0});
      return q;
    }
    if (c == '\'' || c == '"') {
      std::size_t q = p + 1;
      while (q < src_.size() && src_[q] != c) q += src_[q] == '\\' ? 2 : 1;
      if (q >= src_.size()) unexpected_char(p);
      tokens_.push_back(Token{TokenKind::String, unescape(std::string_view(src_).substr(p + 1, q - p - 1), line), line, 0, 0});
      return q + 1;
    }
    static constexpr std::string_view kTwoCharOps[] = {"**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoCharOps) {
      if (at(p, op)) {
        tokens_.push_back(Token{TokenKind::Operator, std::string(op), line, 0, 0});
        return p + 2;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      unexpected_char(p);
    if (c == '{') balancing.push_back('}');
    if (c == '(') balancing.push_back(')');
    if (c == '[') balancing.push_back(']');
    if (c == '}' || c == ')' || c == ']') {
      if (balancing.empty()) error(p, "unexpected '" + std::string(1, c) + "'");
      char expected = balancing.back();
      balancing.pop_back();
      if (expected != c) error(p, "unexpected '" + std::string(1, c) + "', expected '" + std::string(1, expected) + "'");
    }
    tokens_.push_back(Token{TokenKind::Operator, std::string(1, c), line, 0, 0});
    return p + 1;
  }

  std::string src_;
  const Options& options_;
  std::vector<Token> tokens_;
  std::size_t counted_pos_ = 0;
  int counted_line_ = 1;
};

// jinja2 treats \r\n, \r and \n alike and drops one trailing newline
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const Options& options) {
  return Lexer(normalize_newlines(source), options).run();
}

}  // namespace corvid::jinja
