#include "corvid/server/multipart.h"

#include <utility>

#include "corvid/core/ascii.h"
#include "corvid/core/error.h"

namespace corvid::server {

namespace {

constexpr size_t kMaxBoundary = 70;  // RFC 2046 section 5.1.1

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A header value with parameters: `type; name=value; name="quoted \" value"`. Parameter
// names are lowercased; a quoted value may hold ';' and backslash-escaped characters.
struct HeaderValue {
  std::string value;
  std::vector<std::pair<std::string, std::string>> params;

  const std::string* param(std::string_view name) const {
    for (const auto& [k, v] : params)
      if (k == name) return &v;
    return nullptr;
  }
};

HeaderValue parse_header_value(std::string_view s, const char* what) {
  HeaderValue out;
  size_t i = s.find(';');
  out.value = ascii_lower(trim(s.substr(0, i)));
  while (i < s.size()) {
    ++i;  // past ';'
    while (i < s.size() && is_space(s[i])) ++i;
    if (i == s.size()) break;  // a trailing ';'
    const size_t eq = s.find_first_of("=;", i);
    if (eq == std::string_view::npos || s[eq] == ';') fail("multipart: ", what, ": parameter without a value");
    std::string name = ascii_lower(trim(s.substr(i, eq - i)));
    i = eq + 1;
    while (i < s.size() && is_space(s[i])) ++i;
    std::string value;
    if (i < s.size() && s[i] == '"') {
      bool closed = false;
      for (++i; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          value += s[++i];
        } else if (s[i] == '"') {
          closed = true;
          ++i;
          break;
        } else {
          value += s[i];
        }
      }
      if (!closed) fail("multipart: ", what, ": unterminated quoted value of '", name, "'");
      while (i < s.size() && is_space(s[i])) ++i;
      if (i < s.size() && s[i] != ';') fail("multipart: ", what, ": bytes after the quoted value of '", name, "'");
    } else {
      const size_t end = std::min(s.find(';', i), s.size());
      value = std::string(trim(s.substr(i, end - i)));
      i = end;
    }
    out.params.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

// One part's header block (the lines before its blank line, CRLFs between them).
MultipartPart parse_part_headers(std::string_view block, size_t index) {
  MultipartPart part;
  bool disposition = false;
  const std::string where = "part " + std::to_string(index + 1);
  while (!block.empty()) {
    const size_t eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 2);
    if (line.empty() || is_space(line.front()))
      fail("multipart: ", where, ": a header line is empty or folded (RFC 7578 has neither)");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) fail("multipart: ", where, ": a header line has no ':'");
    const std::string name = ascii_lower(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (disposition) fail("multipart: ", where, " has two Content-Disposition headers");
      disposition = true;
      const HeaderValue v = parse_header_value(value, "Content-Disposition");
      if (v.value != "form-data") fail("multipart: ", where, ": Content-Disposition is '", v.value, "', not form-data");
      if (const std::string* n = v.param("name")) part.name = *n;
      if (const std::string* f = v.param("filename")) {
        part.filename = *f;
        part.has_filename = true;
      }
    } else if (name == "content-type") {
      part.content_type = std::string(value);
    }  // other headers (Content-Transfer-Encoding, RFC 7578 says not to send it) are ignored
  }
  if (!disposition) fail("multipart: ", where, " has no Content-Disposition header");
  if (part.name.empty()) fail("multipart: ", where, " has no name (Content-Disposition: form-data; name=...)");
  return part;
}

}  // namespace

const MultipartPart* MultipartForm::find(std::string_view name) const {
  for (const MultipartPart& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<const MultipartPart*> MultipartForm::all(std::string_view name) const {
  std::vector<const MultipartPart*> out;
  for (const MultipartPart& p : parts)
    if (p.name == name) out.push_back(&p);
  return out;
}

std::string multipart_boundary(std::string_view content_type) {
  const HeaderValue v = parse_header_value(content_type, "Content-Type");
  if (v.value != "multipart/form-data")
    fail("the body must be multipart/form-data (a file upload), not '", v.value.empty() ? "nothing" : v.value, "'");
  const std::string* boundary = v.param("boundary");
  if (!boundary || boundary->empty()) fail("multipart: the Content-Type header has no boundary parameter");
  if (boundary->size() > kMaxBoundary)
    fail("multipart: the boundary is ", boundary->size(), " characters long; at most ", kMaxBoundary, " are allowed");
  for (char c : *boundary)
    if (c == '\r' || c == '\n') fail("multipart: the boundary holds a line break");
  return *boundary;
}

MultipartForm parse_multipart(std::string_view body, std::string_view boundary, const MultipartLimits& limits) {
  CORVID_CHECK(!boundary.empty(), "multipart: empty boundary");
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  // The first boundary line opens the body or follows the preamble's last CRLF.
  size_t pos = 0;
  if (body.substr(0, dash.size()) != dash) {
    pos = body.find(delimiter);
    if (pos == std::string_view::npos) fail("multipart: the body has no boundary line '", dash, "'");
    pos += 2;
  }
  MultipartForm form;
  for (;;) {
    size_t p = pos + dash.size();
    if (body.substr(p, 2) == "--") return form;  // the close delimiter; the epilogue is ignored
    while (p < body.size() && is_space(body[p])) ++p;  // transport padding
    if (body.substr(p, 2) != "\r\n") {
      if (p >= body.size()) fail("multipart: the body ends after a boundary line, without the closing '", dash, "--'");
      fail("multipart: a boundary line '", dash, "' is followed by other bytes (is the boundary right?)");
    }
    p += 2;
    if (form.parts.size() >= limits.max_parts) fail("multipart: more than ", limits.max_parts, " parts");
    // The header block ends at the first empty line (at once when there are no headers).
    size_t content = 0;
    std::string_view block;
    if (body.substr(p, 2) == "\r\n") {
      content = p + 2;
    } else {
      const std::string_view window = body.substr(p, limits.max_header_bytes + 4);
      const size_t end = window.find("\r\n\r\n");
      if (end == std::string_view::npos) {
        if (window.size() > limits.max_header_bytes)
          fail("multipart: part ", form.parts.size() + 1, "'s header block is longer than ", limits.max_header_bytes,
               " bytes");
        fail("multipart: part ", form.parts.size() + 1, "'s header block does not end (no empty line)");
      }
      block = window.substr(0, end);
      content = p + end + 4;
    }
    MultipartPart part = parse_part_headers(block, form.parts.size());
    const size_t next = body.find(delimiter, content);
    if (next == std::string_view::npos)
      fail("multipart: part ", form.parts.size() + 1, " ('", part.name, "') has no boundary after it: the body ends "
           "without its closing '", dash, "--'");
    part.body = body.substr(content, next - content);
    form.parts.push_back(std::move(part));
    pos = next + 2;
  }
}

}  // namespace corvid::server
