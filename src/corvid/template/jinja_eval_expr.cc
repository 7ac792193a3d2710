// Expression evaluation and Python's operators (see jinja_eval.h).
#include <cmath>
#include <cstdio>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_eval.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja {
namespace {

[[noreturn]] void raise_undefined(const Value& v) { fail(v.undefined_message()); }

bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }
std::int64_t integral(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }
bool is_numeric(const Value& v) { return v.is_number() || v.is_bool(); }
double numeric(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float(); }

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for ", op == "**" ? "** or pow()" : op, ": '", a.type_name(), "' and '",
       b.type_name(), "'");
}

// Python ints are unbounded; corvid's are 64-bit and refuse to wrap.
std::int64_t int_op(char op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  bool overflowed = op == '+' ? __builtin_add_overflow(a, b, &r)
                    : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                : __builtin_mul_overflow(a, b, &r);
  if (overflowed) fail("integer overflow");
  return r;
}

Value repeat(const Value& seq, std::int64_t times, std::size_t max_bytes) {
  // An empty sequence repeated any number of times is empty: O(1), not `times` rounds of
  // nothing (a template's `(1343**4) * []` would otherwise loop 3e12 times).
  const bool empty = seq.is_string() ? seq.as_string().empty() : seq.as_array().empty();
  if (times <= 0 || empty)
    return seq.is_string() ? Value(std::string()) : seq.is_tuple() ? Value::tuple({}) : Value::array({});
  if (seq.is_string()) {
    if (seq.as_string().size() * static_cast<std::size_t>(times) > max_bytes) fail("string repetition too large");
    std::string out;
    for (std::int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  if (seq.as_array().size() * static_cast<std::size_t>(times) > max_bytes) fail("list repetition too large");
  std::vector<Value> out;
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_array().begin(), seq.as_array().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
}

// jinja2's Markup + str escapes the plain operand; the result stays Markup.
Value markup_concat(const Value& a, const Value& b) {
  auto escaped = [](const Value& v) { return v.is_markup() ? v.as_string() : apply_filter("escape", v, {}).as_string(); };
  return Value::markup(escaped(a) + escaped(b));
}

}  // namespace

std::vector<Value> iterate_values(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Array: return v.as_array();
    case Value::Kind::Undefined: return {};
    case Value::Kind::Object: {
      std::vector<Value> keys;
      for (const auto& entry : v.as_object().entries) keys.push_back(dict_key_value(entry.first));
      return keys;
    }
    case Value::Kind::String: {
      // Python iterates code points; an ill-formed byte is one (escaped) character.
      std::vector<Value> chars;
      for (char32_t c : unicode::decode(v.as_string())) {
        std::string one;
        unicode::append(one, c);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    default: fail("'", v.type_name(), "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!needle.is_string()) fail("'in <string>' requires string as left operand, not ", needle.type_name());
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::Array:
      for (const Value& item : container.as_array())
        if (item == needle) return true;
      return false;
    case Value::Kind::Object:
      if (container.as_object().is_namespace && !needle.is_string()) return false;
      return container.as_object().find(dict_key(needle)) != nullptr;  // unhashable: TypeError
    case Value::Kind::Undefined: return false;
    default: fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

Value binary_operator(std::string_view op, const Value& a, const Value& b, std::size_t max_bytes) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "+") {
    if (is_integral(a) && is_integral(b)) return Value(int_op('+', integral(a), integral(b)));
    if (is_numeric(a) && is_numeric(b)) return Value(numeric(a) + numeric(b));
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) return markup_concat(a, b);
      return Value(a.as_string() + b.as_string());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      std::vector<Value> joined = a.as_array();
      joined.insert(joined.end(), b.as_array().begin(), b.as_array().end());
      return a.is_tuple() ? Value::tuple(std::move(joined)) : Value::array(std::move(joined));
    }
    if (a.is_string() || a.is_list() || a.is_tuple())
      fail("can only concatenate ", a.type_name(), " (not \"", b.type_name(), "\") to ", a.type_name());
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (is_integral(a) && is_integral(b)) return Value(int_op('-', integral(a), integral(b)));
    if (is_numeric(a) && is_numeric(b)) return Value(numeric(a) - numeric(b));
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (is_integral(a) && is_integral(b)) return Value(int_op('*', integral(a), integral(b)));
    if (is_numeric(a) && is_numeric(b)) return Value(numeric(a) * numeric(b));
    auto sequence = [](const Value& v) { return v.is_string() || v.is_list() || v.is_tuple(); };
    if (sequence(a) && is_integral(b)) return repeat(a, integral(b), max_bytes);
    if (sequence(b) && is_integral(a)) return repeat(b, integral(a), max_bytes);
    if (sequence(a) || sequence(b))
      fail("can't multiply sequence by non-int of type '", (a.is_string() || a.is_array() ? b : a).type_name(), "'");
    unsupported(op, a, b);
  }
  if (op == "%" && a.is_string()) {
    std::string text = percent_format(a, b);
    return a.is_markup() ? Value::markup(std::move(text)) : Value(std::move(text));
  }
  if (!is_numeric(a) || !is_numeric(b)) unsupported(op, a, b);
  bool ints = is_integral(a) && is_integral(b);
  if (op == "/") {
    if (numeric(b) == 0) fail(ints ? "division by zero" : "float division by zero");
    return Value(numeric(a) / numeric(b));
  }
  if (op == "//" || op == "%") {
    if (ints) {
      std::int64_t x = integral(a), y = integral(b);
      if (y == 0) fail(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    double x = numeric(a), y = numeric(b);
    if (y == 0) fail(op == "//" ? "float floor division by zero" : "float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(op == "//" ? std::floor((x - m) / y + 0.5) : m);
  }
  if (op == "**") {
    if (ints && integral(b) >= 0) {
      std::int64_t base = integral(a), result = 1;
      for (std::int64_t e = integral(b); e > 0; --e) {
        if (__builtin_mul_overflow(result, base, &result)) fail("integer overflow");
        if (result == 0 || result == 1) break;
      }
      return Value(result);
    }
    if (numeric(a) == 0 && numeric(b) < 0) fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(numeric(a), numeric(b)));
  }
  fail("unknown operator '", op, "'");
}

Value Renderer::eval(const Expr& e, const FramePtr& frame) {
  DepthGuard guard(nesting_, e.line, kMaxNestedEvaluation);
  try {
    Value v = eval_node(e, frame);
    // Bounds memory as the output is bounded: `{% set ns.s = ns.s + ns.s %}` in a loop doubles a string.
    if (v.is_string() && v.as_string().size() > options_.max_output_bytes)
      fail("value larger than the template output limit (", options_.max_output_bytes, " bytes)");
    if (v.is_array() && v.as_array().size() > kMaxListLength) fail("list longer than ", kMaxListLength, " items");
    return v;
  } catch (const TemplateError&) {
    throw;
  } catch (const RaisedException&) {
    throw;
  } catch (const std::exception& ex) {
    throw TemplateError(e.line, ex.what());
  }
}

CallArgs Renderer::eval_args(const Expr& e, const FramePtr& frame, std::size_t first) {
  CallArgs args;
  for (std::size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i], frame));
  if (e.star_args) {
    Value extra = eval(*e.star_args, frame);
    for (Value& v : iterate_values(extra)) args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value, frame));
  if (e.star_kwargs) {
    Value extra = eval(*e.star_kwargs, frame);
    if (!extra.is_object()) fail("argument after ** must be a mapping, not ", extra.type_name());
    for (const auto& [key, value] : extra.as_object().entries) args.keyword.emplace_back(key, *value);
  }
  return args;
}

Value Renderer::eval_call(const Expr& e, const FramePtr& frame, const Value* extra_caller) {
  Value callee = eval(*e.items[0], frame);
  CallArgs args = eval_args(e, frame, 1);
  if (extra_caller) args.keyword.emplace_back("caller", *extra_caller);
  if (callee.is_undefined()) raise_undefined(callee);
  if (callee.is_object()) {  // a recursive loop: loop(children)
    const Value* call = callee.as_object().find("__call__");
    if (call && call->is_function()) callee = *call;
  }
  if (!callee.is_function()) fail("'", callee.type_name(), "' object is not callable");
  return callee.as_function()(args);
}

Value Renderer::eval_compare(const Expr& e, const FramePtr& frame) {
  Value left = eval(*e.items[0], frame);
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], frame);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = left == right;
    else if (op == "!=") ok = !(left == right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "notin") ok = !contains(right, left);
    else {
      if (left.is_undefined()) raise_undefined(left);
      if (right.is_undefined()) raise_undefined(right);
      try {
        if (op == "<") ok = Value::less(left, right);
        else if (op == ">") ok = Value::less(right, left);
        else if (op == "<=") ok = !Value::less(right, left);
        else ok = !Value::less(left, right);
      } catch (const Error&) {  // Python names the operator as written, operands in order
        fail("'", op, "' not supported between instances of '", left.type_name(), "' and '", right.type_name(), "'");
      }
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Renderer::eval_node(const Expr& e, const FramePtr& frame) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::Literal: return e.value;
    case K::Name: {
      const Value* v = frame->find(e.name);
      return v ? *v : Value::undefined(e.name);
    }
    case K::List:
    case K::Tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) items.push_back(eval(*item, frame));
      return e.kind == K::Tuple ? Value::tuple(std::move(items)) : Value::array(std::move(items));
    }
    case K::Dict: {
      auto object = std::make_shared<Object>();
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i], frame);
        object->set(dict_key(key), eval(*e.items[i + 1], frame));
      }
      return Value::object(std::move(object));
    }
    case K::Attribute: return get_attribute(eval(*e.items[0], frame), e.name);
    case K::Item: {  // operands left to right, as Python
      Value target = eval(*e.items[0], frame);
      return get_item(target, eval(*e.items[1], frame));
    }
    case K::Slice: {
      Value target = eval(*e.items[0], frame);
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.items[i + 1]) parts[i] = eval(*e.items[i + 1], frame);
      return get_slice(target, parts[0], parts[1], parts[2]);
    }
    case K::Call: return eval_call(e, frame, nullptr);
    case K::Filter: {
      Value target = eval(*e.items[0], frame);
      CallArgs args = eval_args(e, frame, 1);
      if (e.unknown) fail("No filter named '", e.name, "' found.");
      return apply_filter(e.name, target, args);
    }
    case K::Test: {
      Value target = eval(*e.items[0], frame);
      CallArgs args = eval_args(e, frame, 1);
      if (e.unknown) fail("No test named '", e.name, "' found.");
      return Value(apply_test(e.name, target, args) != e.negated);
    }
    case K::Not: return Value(!eval(*e.items[0], frame).truthy());
    case K::Negate:
    case K::Plus: {
      Value v = eval(*e.items[0], frame);
      if (v.is_undefined()) raise_undefined(v);
      if (!is_numeric(v)) fail("bad operand type for unary ", e.kind == K::Negate ? "-" : "+", ": '", v.type_name(), "'");
      if (e.kind == K::Plus) return is_integral(v) ? Value(integral(v)) : v;
      if (is_integral(v)) return Value(int_op('-', 0, integral(v)));
      return Value(-v.as_float());
    }
    case K::Binary:
    {
      Value left = eval(*e.items[0], frame);
      return binary_operator(e.name, left, eval(*e.items[1], frame), options_.max_output_bytes);
    }
    case K::And: {
      Value left = eval(*e.items[0], frame);
      return left.truthy() ? eval(*e.items[1], frame) : left;
    }
    case K::Or: {
      Value left = eval(*e.items[0], frame);
      return left.truthy() ? left : eval(*e.items[1], frame);
    }
    case K::Compare: return eval_compare(e, frame);
    case K::Concat: {
      std::string text;
      for (const auto& item : e.items) text += eval(*item, frame).str();
      if (text.size() > options_.max_output_bytes) fail("string too large");
      return Value(std::move(text));
    }
    case K::Conditional:
      if (eval(*e.items[0], frame).truthy()) return eval(*e.items[1], frame);
      if (e.items[2]) return eval(*e.items[2], frame);
      return Value::undefined_with_message("the inline if-expression on line " + std::to_string(e.line) +
                                           " evaluated to false and no else section was defined.");
    case K::BlockValue: return block_value_ ? *block_value_ : Value::undefined();
  }
  fail("unsupported expression");
}

}  // namespace corvid::jinja
