// For loops, macros and call blocks (see jinja_eval.h).
#include <optional>

#include "corvid/template/jinja_eval.h"

namespace corvid::jinja {
namespace {

// jinja2's loop.cycle(a, b, ...): the item for this iteration.
Value cycle_function(std::size_t index0) {
  return Value::function("cycle", [index0](const CallArgs& args) -> Value {
    if (args.positional.empty()) fail("no items for cycling given");
    return args.positional[index0 % args.positional.size()];
  });
}

}  // namespace

void Renderer::keep_alive(const FramePtr& frame, int line) {
  if (!keep_alive_.empty() && keep_alive_.back() == frame) return;
  // Each kept scope lives until the render ends; a template defining macros
  // in a long loop would otherwise grow without bound.
  if (keep_alive_.size() >= kMaxClosures) throw TemplateError(line, "too many macro and call-block definitions");
  keep_alive_.push_back(frame);
}

Value Renderer::make_macro(const Stmt& s, const FramePtr& frame) {
  // The closure is held weakly (a macro stored in its own frame would
  // otherwise keep it alive forever); keep_alive_ holds it for the render.
  keep_alive(frame, s.line);
  std::weak_ptr<Frame> closure = frame;
  const Stmt* macro = &s;
  return Value::function(s.text, [this, macro, closure](const CallArgs& args) {
    return call_macro(*macro, macro->text, closure.lock(), args);
  });
}

Value Renderer::make_caller(const Stmt& s, const FramePtr& frame) {
  keep_alive(frame, s.line);
  std::weak_ptr<Frame> closure = frame;
  const Stmt* block = &s;
  return Value::function("caller", [this, block, closure](const CallArgs& args) {
    return call_macro(*block, "caller", closure.lock(), args);
  });
}

Value Renderer::call_macro(const Stmt& s, const std::string& name, const FramePtr& closure, const CallArgs& args) {
  DepthGuard guard(call_depth_, s.line, options_.max_recursion_depth);
  auto inner = std::make_shared<Frame>();
  inner->parent = closure;
  std::vector<bool> bound(s.params.size(), false);
  std::vector<Value> varargs;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < s.params.size()) {
      inner->set(s.params[i].name, args.positional[i]);
      bound[i] = true;
    } else if (s.uses_varargs) {
      varargs.push_back(args.positional[i]);
    } else {
      fail("macro '", name, "' takes not more than ", s.params.size(), " argument(s)");
    }
  }
  auto kwargs = std::make_shared<Object>();
  std::optional<Value> caller;
  for (const auto& [key, value] : args.keyword) {
    std::size_t j = 0;
    while (j < s.params.size() && s.params[j].name != key) ++j;
    if (j < s.params.size()) {
      if (bound[j]) fail("macro '", name, "' got multiple values for argument '", key, "'");
      inner->set(key, value);
      bound[j] = true;
    } else if (key == "caller" && s.uses_caller) {
      caller = value;
    } else if (s.uses_kwargs) {
      kwargs->set(key, value);
    } else {
      fail("macro '", name, "' takes no keyword argument '", key, "'");
    }
  }
  for (std::size_t j = 0; j < s.params.size(); ++j) {
    if (bound[j]) continue;
    const Param& p = s.params[j];
    inner->set(p.name, p.default_value ? eval(*p.default_value, inner)
                                       : Value::undefined_with_message("parameter '" + p.name + "' was not provided"));
  }
  if (s.uses_varargs) inner->set("varargs", Value::tuple(std::move(varargs)));
  if (s.uses_kwargs) inner->set("kwargs", Value::object(kwargs));
  if (caller) inner->set("caller", *caller);
  return Value(capture(s.body, inner));
}

Renderer::Flow Renderer::exec_for(const Stmt& s, const FramePtr& frame) {
  std::vector<Value> items = iterate_values(eval(*s.expr, frame));
  write(render_loop(s, frame, std::move(items), 1));
  return Flow::Normal;
}

// Renders one loop over `items` (a recursive loop's loop(children) renders
// a nested one at depth + 1) and returns its output.
std::string Renderer::render_loop(const Stmt& s, const FramePtr& frame, std::vector<Value> items, int depth) {
  DepthGuard guard(call_depth_, s.line, depth > 1 ? options_.max_recursion_depth : 1 << 30);
  if (s.condition) {  // `for x in items if cond`: filtered before loop.* counts
    std::vector<Value> kept;
    for (Value& item : items) {
      step(s.line);
      auto probe = std::make_shared<Frame>();
      probe->parent = frame;
      assign(*s.target, item, probe);
      if (eval(*s.condition, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  struct Restore {
    std::string*& out;
    std::string* saved;
    ~Restore() { out = saved; }
  } restore{out_, saved};

  Value recurse;
  if (s.recursive) {
    keep_alive(frame, s.line);
    std::weak_ptr<Frame> outer = frame;
    const Stmt* loop_stmt = &s;
    recurse = Value::function("loop", [this, loop_stmt, outer, depth](const CallArgs& args) {
      if (args.positional.size() != 1) fail("loop() takes exactly one argument");
      return Value(render_loop(*loop_stmt, outer.lock(), iterate_values(args.positional[0]), depth + 1));
    });
  }
  auto last_changed = std::make_shared<std::optional<std::vector<Value>>>();
  const auto length = static_cast<std::int64_t>(items.size());
  bool body_completed = false;
  for (std::int64_t i = 0; i < length; ++i) {
    step(s.line);
    auto inner = std::make_shared<Frame>();
    inner->parent = frame;
    if (s.uses_loop) {
      auto loop = std::make_shared<Object>();
      loop->set("index", Value(i + 1));
      loop->set("index0", Value(i));
      loop->set("revindex", Value(length - i));
      loop->set("revindex0", Value(length - i - 1));
      loop->set("first", Value(i == 0));
      loop->set("last", Value(i == length - 1));
      loop->set("length", Value(length));
      loop->set("depth", Value(static_cast<std::int64_t>(depth)));
      loop->set("depth0", Value(static_cast<std::int64_t>(depth - 1)));
      loop->set("previtem", i > 0 ? items[i - 1] : Value::undefined_with_message("there is no previous item"));
      loop->set("nextitem", i + 1 < length ? items[i + 1] : Value::undefined_with_message("there is no next item"));
      loop->set("cycle", cycle_function(static_cast<std::size_t>(i)));
      loop->set("changed", Value::function("changed", [last_changed](const CallArgs& args) {
        if (*last_changed && **last_changed == args.positional) return Value(false);
        *last_changed = args.positional;
        return Value(true);
      }));
      if (s.recursive) loop->set("__call__", recurse);
      inner->set("loop", Value::object(std::move(loop)));
    }
    assign(*s.target, items[i], inner);
    Flow flow = exec_body(s.body, inner);
    if (flow == Flow::Normal) body_completed = true;
    if (flow == Flow::Break) break;
  }
  // jinja2 runs `else` unless some iteration reached the end of the body (its
  // flag is cleared there), so a loop that only `continue`d or `break`s at once runs it.
  if (!body_completed) {
    auto inner = std::make_shared<Frame>();
    inner->parent = frame;
    exec_body(s.else_body, inner);
  }
  return buffer;
}

}  // namespace corvid::jinja
