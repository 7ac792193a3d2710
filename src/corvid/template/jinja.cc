#include "corvid/template/jinja.h"

#include "corvid/template/jinja_eval.h"
#include "corvid/template/jinja_parser.h"

namespace corvid::jinja {

TemplateError::TemplateError(int line, const std::string& message)
    : Error("template line " + std::to_string(line) + ": " + message), line_(line) {}

Template::Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

Template Template::parse(std::string_view source, Options options) {
  auto program = std::make_shared<Program>();
  program->options = std::move(options);
  try {
    program->body = parse_template(source, program->options);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::exception& e) {  // e.g. allocation failure on absurd input
    throw TemplateError(0, e.what());
  }
  return Template(std::move(program));
}

std::string Template::render(const Json& context) const {
  Renderer renderer(program_->options);
  return renderer.render(program_->body, context);
}

}  // namespace corvid::jinja
