// Statement execution, scopes, macros and globals (see jinja_eval.h).
#include "corvid/template/jinja_eval.h"

#include <ctime>

#include "corvid/template/jinja_builtins.h"

namespace corvid::jinja {
namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

std::int64_t int_argument(const Value& v, const char* what) {
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (!v.is_int()) fail("'", v.type_name(), "' object cannot be interpreted as an integer (", what, ")");
  return v.as_int();
}

Value make_range(const CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  std::int64_t start = 0, stop = 0, step = 1;
  const auto& p = args.positional;
  if (p.size() == 1) {
    stop = int_argument(p[0], "range");
  } else if (p.size() == 2 || p.size() == 3) {
    start = int_argument(p[0], "range");
    stop = int_argument(p[1], "range");
    if (p.size() == 3) step = int_argument(p[2], "range");
  } else {
    fail("range expected at most 3 arguments, got ", p.size());
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // 128-bit so that extreme bounds cannot overflow.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
  if (count > kMaxRange) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ").");
  std::vector<Value> items;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i)
    items.emplace_back(static_cast<std::int64_t>(start + static_cast<__int128>(i) * step));
  return Value::array(std::move(items));
}

// dict(**kw) and namespace(**kw): a positional mapping first, then the keywords.
Value make_object(const CallArgs& args, bool is_namespace, const char* what) {
  auto object = std::make_shared<Object>();
  object->is_namespace = is_namespace;
  if (args.positional.size() > 1) fail(what, " expected at most 1 argument, got ", args.positional.size());
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_object()) fail("'", init.type_name(), "' object is not a mapping");
    for (const auto& [key, value] : init.as_object().entries) object->set(key, *value);
  }
  for (const auto& [key, value] : args.keyword) object->set(key, value);
  return Value::object(std::move(object));
}

}  // namespace

const Value* Frame::find(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent.get())
    for (const auto& [key, value] : f->vars)
      if (key == name) return &value;
  return nullptr;
}

void Frame::set(const std::string& name, Value value) {
  for (auto& [key, existing] : vars) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

DepthGuard::DepthGuard(int& c, int line, int limit) : counter(c) {
  if (++counter > limit) {
    --counter;
    // Python's RecursionError text as a runaway macro recursion (Hermes/Command-R tool
    // templates on a non-basic "type") raises it under jinja2 with Python 3.11.
    throw TemplateError(line, "maximum recursion depth exceeded");
  }
}
DepthGuard::~DepthGuard() { --counter; }

void Renderer::write(std::string_view text) {
  out_->append(text);
  if (out_->size() > options_.max_output_bytes)
    fail("template output exceeds ", options_.max_output_bytes, " bytes");
}

void Renderer::step(int line) {
  if (++steps_ > options_.max_steps) throw TemplateError(line, "template exceeded its step limit");
}

FramePtr Renderer::make_globals() {
  auto globals = std::make_shared<Frame>();
  globals->set("raise_exception", Value::function("raise_exception", [](const CallArgs& args) -> Value {
    const Value* message = args.get("message", 0);
    if (!message) fail("raise_exception() missing 1 required positional argument: 'message'");
    throw RaisedException(message->str());
  }));
  const Options* options = &options_;
  globals->set("strftime_now", Value::function("strftime_now", [options](const CallArgs& args) -> Value {
    const Value* format = args.get("format", 0);
    if (!format || !format->is_string()) fail("strftime_now() expects a format string");
    std::tm now{};
    if (options->now) {
      now = options->now();
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &now);
    }
    if (format->as_string().empty()) return Value(std::string());
    std::string buffer(256 + format->as_string().size() * 8, '\0');
    std::size_t n = std::strftime(buffer.data(), buffer.size(), format->as_string().c_str(), &now);
    buffer.resize(n);
    return Value(std::move(buffer));
  }));
  globals->set("namespace", Value::function("namespace", [](const CallArgs& args) {
    return make_object(args, true, "namespace");
  }));
  globals->set("dict", Value::function("dict", [](const CallArgs& args) { return make_object(args, false, "dict"); }));
  globals->set("range", Value::function("range", make_range));
  return globals;
}

std::string Renderer::render(const Body& body, const Json& context) {
  auto top = std::make_shared<Frame>();
  top->parent = make_globals();
  if (!context.is_object()) fail("the template context must be a JSON object");
  for (auto it = context.begin(); it != context.end(); ++it) top->set(it.key(), Value::from_json(it.value()));
  std::string out;
  out_ = &out;
  exec_body(body, top);
  return out;
}

std::string Renderer::capture(const Body& body, const FramePtr& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Renderer::Flow Renderer::exec_body(const Body& body, const FramePtr& frame) {
  for (const auto& s : body) {
    Flow flow = exec(*s, frame);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

void Renderer::assign(const Expr& target, const Value& value, const FramePtr& frame) {
  if (target.kind == Expr::Kind::Name) {
    frame->set(target.name, value);
    return;
  }
  if (target.kind == Expr::Kind::Attribute) {  // {% set ns.attr = value %}
    const Value* object = frame->find(target.items[0]->name);
    if (!object || !object->is_object() || !object->as_object().is_namespace)
      fail("cannot assign attribute on non-namespace object");
    object->mutable_object().set(target.name, value);
    return;
  }
  if (!value.is_array() && !value.is_string() && !value.is_object() && !value.is_undefined())
    fail("cannot unpack non-iterable ", value.type_name(), " object");
  std::vector<Value> values = iterate_values(value);
  if (values.size() < target.items.size())
    fail("not enough values to unpack (expected ", target.items.size(), ", got ", values.size(), ")");
  if (values.size() > target.items.size()) fail("too many values to unpack (expected ", target.items.size(), ")");
  for (std::size_t i = 0; i < values.size(); ++i) assign(*target.items[i], values[i], frame);
}

Renderer::Flow Renderer::exec(const Stmt& s, const FramePtr& frame) {
  step(s.line);
  DepthGuard guard(nesting_, s.line, kMaxNestedEvaluation);
  try {
    switch (s.kind) {
      case Stmt::Kind::Text: write(s.text); return Flow::Normal;
      case Stmt::Kind::Print: write(eval(*s.expr, frame).str()); return Flow::Normal;
      case Stmt::Kind::If:
        for (std::size_t i = 0; i < s.conditions.size(); ++i)
          if (eval(*s.conditions[i], frame).truthy()) return exec_body(s.bodies[i], frame);
        return exec_body(s.else_body, frame);
      case Stmt::Kind::For: return exec_for(s, frame);
      case Stmt::Kind::Set: assign(*s.target, eval(*s.expr, frame), frame); return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        auto inner = std::make_shared<Frame>();  // the block's own assignments stay inside it
        inner->parent = frame;
        Value text(capture(s.body, inner));
        if (s.expr) {
          const Value* saved = block_value_;
          block_value_ = &text;
          Value filtered;
          try {
            filtered = eval(*s.expr, frame);
          } catch (...) {
            block_value_ = saved;
            throw;
          }
          block_value_ = saved;
          text = filtered;
        }
        assign(*s.target, text, frame);
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame;
        Value text(capture(s.body, inner));
        const Value* saved = block_value_;
        block_value_ = &text;
        Value filtered;
        try {
          filtered = eval(*s.expr, frame);
        } catch (...) {
          block_value_ = saved;
          throw;
        }
        block_value_ = saved;
        write(filtered.str());
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: frame->set(s.text, make_macro(s, frame)); return Flow::Normal;
      case Stmt::Kind::CallBlock: {
        Value caller = make_caller(s, frame);
        write(eval_call(*s.expr, frame, &caller).str());
        return Flow::Normal;
      }
      case Stmt::Kind::With: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame;
        std::vector<Value> values;
        for (const auto& v : s.values) values.push_back(eval(*v, frame));  // evaluated in the outer scope
        for (std::size_t i = 0; i < values.size(); ++i) assign(*s.targets[i], values[i], inner);
        return exec_body(s.body, inner);
      }
      case Stmt::Kind::Scope: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame;
        exec_body(s.body, inner);
        return Flow::Normal;
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
  } catch (const TemplateError&) {
    throw;
  } catch (const RaisedException&) {
    throw;
  } catch (const std::exception& e) {
    throw TemplateError(s.line, e.what());
  }
  return Flow::Normal;
}

}  // namespace corvid::jinja
