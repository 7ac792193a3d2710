// A Jinja2 interpreter for chat templates.
//
// Chat templates are Jinja2 programs shipped with each checkpoint
// (tokenizer_config.json, chat_template.jinja, GGUF `tokenizer.chat_template`).
// The oracle is Python jinja2 as transformers configures it: a sandboxed
// environment with trim_blocks and lstrip_blocks, the loop-controls extension,
// `tojson` as json.dumps(ensure_ascii=False, ...), and the globals
// raise_exception(msg) and strftime_now(fmt). Rendering must equal that
// reference byte for byte (tests/fixtures/templates holds the expected outputs).
//
// Safety: a template has no access to files, the network or the environment;
// loop iterations, recursion depth and output size are bounded by Options.
// Anything unsupported or malformed is a TemplateError naming the template line.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid::jinja {

// Object key order matters (tojson and `items` follow insertion order, as Python dicts do).
using Json = nlohmann::ordered_json;

struct Options {
  bool trim_blocks = true;     // transformers' setting
  bool lstrip_blocks = true;   // transformers' setting
  std::size_t max_output_bytes = 16u << 20;
  std::uint64_t max_steps = 20'000'000;  // statements executed + loop iterations
  int max_recursion_depth = 256;         // macro/call nesting and expression depth
  // strftime_now's clock; when empty, the current local time.
  std::function<std::tm()> now;
};

// Syntax errors, unsupported constructs, runtime type errors, exceeded limits.
// what() reads "template line N: <problem>".
class TemplateError : public Error {
 public:
  TemplateError(int line, const std::string& message);
  int line() const { return line_; }

 private:
  int line_;
};

// Thrown by the template's own raise_exception(msg); what() is exactly msg, as
// jinja2's TemplateError(msg) that transformers raises.
class RaisedException : public Error {
 public:
  using Error::Error;
};

class Template {
 public:
  // Parses once; throws TemplateError. The Template may then render many times,
  // from several threads at once.
  static Template parse(std::string_view source, Options options = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // context: a JSON object whose members are the template's variables.
  std::string render(const Json& context) const;

  struct Program;  // the parsed template (defined by the implementation)

 private:
  explicit Template(std::shared_ptr<const Program> program);
  std::shared_ptr<const Program> program_;
};

}  // namespace corvid::jinja
