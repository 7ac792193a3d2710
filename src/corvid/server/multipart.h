// multipart/form-data bodies (RFC 7578 over RFC 2046's multipart syntax): how file
// uploads reach the server (POST /v1/audio/transcriptions). The parts are views into
// the body, which the caller keeps alive; bodies are bytes (binary-safe: a part ends
// only at CRLF "--" boundary). Malformed input is a corvid::Error naming the problem,
// and the bounds below keep a hostile body from costing more than a linear scan.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace corvid::server {

struct MultipartPart {
  std::string name;          // Content-Disposition's name (required)
  std::string filename;      // Content-Disposition's filename ("" when absent)
  bool has_filename = false;  // a file field, even with an empty filename
  std::string content_type;  // the part's Content-Type ("" when absent: text/plain)
  std::string_view body;     // into the parsed body
};

struct MultipartForm {
  std::vector<MultipartPart> parts;  // in body order

  // The first part named `name`, or nullptr.
  const MultipartPart* find(std::string_view name) const;
  // Every part named `name` (repeated fields such as timestamp_granularities[]), in order.
  std::vector<const MultipartPart*> all(std::string_view name) const;
};

struct MultipartLimits {
  size_t max_parts = 64;            // a form's fields (OpenAI's audio API has under 20)
  size_t max_header_bytes = 8192;   // one part's header block
};

// The boundary parameter of a Content-Type header ("multipart/form-data; boundary=x",
// the value quoted or not); an Error when the type is not multipart/form-data or the
// boundary is missing, empty or longer than RFC 2046's 70 characters.
std::string multipart_boundary(std::string_view content_type);

// The parts of `body`: an optional preamble, "--boundary" lines each followed by a
// header block (Content-Disposition: form-data; name=...; filename=..., and an optional
// Content-Type; other headers ignored), a blank line and the part's bytes, then
// "--boundary--" (anything after it is ignored). Lines end in CRLF.
MultipartForm parse_multipart(std::string_view body, std::string_view boundary, const MultipartLimits& limits = {});
// The form's parts view the body: a temporary body would leave them dangling.
MultipartForm parse_multipart(std::string&& body, std::string_view boundary, const MultipartLimits& limits = {}) = delete;

}  // namespace corvid::server
