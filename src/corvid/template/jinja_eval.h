// The evaluator: renders a parsed template (jinja_parser.h) with jinja2's
// semantics — scoping (each for-loop iteration, macro call and `with` block
// has its own scope; namespace() objects carry state out of them), loop
// variables, macros and call blocks, and the globals transformers provides.
// One Renderer serves one render() call, so a Program renders concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corvid/template/jinja_parser.h"
#include "corvid/template/jinja_value.h"

namespace corvid::jinja {

// One scope: variables set here, then the enclosing scope's.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};
using FramePtr = std::shared_ptr<Frame>;

class Renderer;

// Bounds the C++ stack whatever the template does: statements and
// expressions being evaluated inside one another, across macro calls.
constexpr int kMaxNestedEvaluation = 1500;
// Scopes that macros and call blocks close over, kept until the render ends.
constexpr std::size_t kMaxClosures = 100000;
// Longest list an expression may build (`l + l` doubling in a loop).
constexpr std::size_t kMaxListLength = 1u << 20;

// Counts one level of nesting in `counter`; throws TemplateError past `limit`.
struct DepthGuard {
  DepthGuard(int& counter, int line, int limit);
  ~DepthGuard();
  int& counter;
};

class Renderer {
 public:
  explicit Renderer(const Options& options) : options_(options) {}
  std::string render(const Body& body, const Json& context);

 private:
  enum class Flow { Normal, Break, Continue };

  // statements (jinja_eval.cc)
  Flow exec_body(const Body& body, const FramePtr& frame);
  Flow exec(const Stmt& s, const FramePtr& frame);
  Flow exec_for(const Stmt& s, const FramePtr& frame);
  std::string render_loop(const Stmt& s, const FramePtr& frame, std::vector<Value> items, int depth);
  void assign(const Expr& target, const Value& value, const FramePtr& frame);
  std::string capture(const Body& body, const FramePtr& frame);
  void keep_alive(const FramePtr& frame, int line);
  Value make_macro(const Stmt& s, const FramePtr& frame);
  Value make_caller(const Stmt& s, const FramePtr& frame);
  Value call_macro(const Stmt& s, const std::string& name, const FramePtr& closure, const CallArgs& args);
  FramePtr make_globals();
  void write(std::string_view text);
  void step(int line);

  // expressions (jinja_eval_expr.cc)
  Value eval(const Expr& e, const FramePtr& frame);
  Value eval_node(const Expr& e, const FramePtr& frame);
  CallArgs eval_args(const Expr& e, const FramePtr& frame, std::size_t first);
  Value eval_call(const Expr& e, const FramePtr& frame, const Value* extra_caller);
  Value eval_compare(const Expr& e, const FramePtr& frame);

  const Options& options_;
  std::string* out_ = nullptr;  // where output goes now (a capture buffer inside macros and blocks)
  std::uint64_t steps_ = 0;
  int call_depth_ = 0;          // nested macro/caller/recursive-loop calls
  int nesting_ = 0;             // statements and expressions being evaluated
  const Value* block_value_ = nullptr;
  std::vector<FramePtr> keep_alive_;  // scopes that macros and callers close over
};

// Python binary operators on template values (+ - * / // % **), `in`, and
// iteration as a for loop sees it; errors carry Python's message.
Value binary_operator(std::string_view op, const Value& left, const Value& right, std::size_t max_bytes);
bool contains(const Value& container, const Value& needle);
std::vector<Value> iterate_values(const Value& v);

}  // namespace corvid::jinja
