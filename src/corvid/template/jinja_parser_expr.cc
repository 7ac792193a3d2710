// Expression parsing (see jinja_parser_impl.h).
#include <algorithm>

#include "corvid/template/jinja_parser_impl.h"

namespace corvid::jinja::parser_detail {

// Records a finished node's depth; bounds the tree so that evaluating and
// destroying it cannot exhaust the stack (`a.b.c...`, `1+1+1...` nest without recursion here).
ExprPtr Parser::seal(ExprPtr e) const {
  int depth = 0;
  for (const auto& i : e->items)
    if (i) depth = std::max(depth, i->depth);
  for (const auto& k : e->keywords) depth = std::max(depth, k.second->depth);
  if (e->star_args) depth = std::max(depth, e->star_args->depth);
  if (e->star_kwargs) depth = std::max(depth, e->star_kwargs->depth);
  e->depth = depth + 1;
  if (e->depth > kMaxExpressionDepth) fail_at(cur(), "expression nesting too deep");
  return e;
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_ends) const {
  if (cur().kind == TokenKind::PrintEnd || cur().kind == TokenKind::BlockEnd || cur().kind == TokenKind::End) return true;
  if (is_op(")")) return true;
  for (std::string_view e : extra_ends)
    if (is_name(e)) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool with_conditional, std::initializer_list<std::string_view> extra_ends) {
  int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_ends)) break;
    items.push_back(parse_expression(with_conditional));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (items.empty()) fail_at(cur(), "unexpected '" + describe(cur()) + "'");
    return std::move(items[0]);
  }
  auto t = make(Expr::Kind::Tuple, line);
  t->items = std::move(items);
  return seal(std::move(t));
}

ExprPtr Parser::parse_expression(bool with_conditional) {
  NestingGuard guard(*this);
  return with_conditional ? parse_conditional() : parse_or();
}

ExprPtr Parser::parse_conditional() {
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    int line = next().line;
    auto c = make(Expr::Kind::Conditional, line);
    c->items.push_back(parse_or());
    c->items.push_back(std::move(expr));
    c->items.push_back(skip_name("else") ? parse_expression(true) : nullptr);
    expr = seal(std::move(c));
  }
  return expr;
}

ExprPtr Parser::binary(Expr::Kind kind, ExprPtr left, ExprPtr right, int line, std::string op) {
  auto b = make(kind, line);
  b->name = std::move(op);
  b->items.push_back(std::move(left));
  b->items.push_back(std::move(right));
  return seal(std::move(b));
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    int line = next().line;
    left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    int line = next().line;
    left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    NestingGuard guard(*this);
    auto n = make(Expr::Kind::Not, next().line);
    n->items.push_back(parse_not());
    return seal(std::move(n));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().kind == TokenKind::Operator &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && peek().kind == TokenKind::Name && peek().text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::Compare, line);
      cmp->items.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_math1());
  }
  return cmp ? seal(std::move(cmp)) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), t.line, t.text);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto c = make(Expr::Kind::Concat, cur().line);
  c->items.push_back(std::move(first));
  while (skip_op("~")) c->items.push_back(parse_math2());
  return seal(std::move(c));
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), t.line, t.text);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token& t = next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), t.line, t.text);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  NestingGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    node = make(t.text == "-" ? Expr::Kind::Negate : Expr::Kind::Plus, t.line);
    node->items.push_back(parse_unary(false));
    node = seal(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.kind) {
    case TokenKind::Name: {
      next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto lit = make(Expr::Kind::Literal, t.line);
        lit->value = Value(t.text == "true" || t.text == "True");
        return lit;
      }
      if (t.text == "none" || t.text == "None") {
        auto lit = make(Expr::Kind::Literal, t.line);
        lit->value = Value::none();
        return lit;
      }
      auto n = make(Expr::Kind::Name, t.line);
      n->name = t.text;
      return n;
    }
    case TokenKind::String: {
      std::string text;
      int line = t.line;
      while (cur().kind == TokenKind::String) text += next().text;  // 'a' 'b' == 'ab'
      auto lit = make(Expr::Kind::Literal, line);
      lit->value = Value(std::move(text));
      return lit;
    }
    case TokenKind::Int: {
      auto lit = make(Expr::Kind::Literal, t.line);
      lit->value = Value(next().int_value);
      return lit;
    }
    case TokenKind::Float: {
      auto lit = make(Expr::Kind::Literal, t.line);
      lit->value = Value(next().float_value);
      return lit;
    }
    case TokenKind::Operator:
      if (t.text == "(") {
        next();
        int line = t.line;
        if (skip_op(")")) return make(Expr::Kind::Tuple, line);
        ExprPtr inner = parse_tuple(true, {});
        expect_op(")");
        return inner;
      }
      if (t.text == "[") {
        auto list = make(Expr::Kind::List, next().line);
        while (!is_op("]")) {
          if (!list->items.empty()) expect_op(",");
          if (is_op("]")) break;
          list->items.push_back(parse_expression(true));
        }
        next();
        return seal(std::move(list));
      }
      if (t.text == "{") {
        auto dict = make(Expr::Kind::Dict, next().line);
        while (!is_op("}")) {
          if (!dict->items.empty()) expect_op(",");
          if (is_op("}")) break;
          dict->items.push_back(parse_expression(true));
          expect_op(":");
          dict->items.push_back(parse_expression(true));
        }
        next();
        return seal(std::move(dict));
      }
      break;
    default:
      break;
  }
  fail_at(t, "unexpected '" + describe(t) + "'");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else return node;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) node = parse_filter_chain(std::move(node));
    else if (is_name("is")) node = parse_test(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else return node;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  NestingGuard guard(*this);
  const Token& t = next();
  if (t.text == ".") {
    if (cur().kind == TokenKind::Name) {
      auto a = make(Expr::Kind::Attribute, t.line);
      a->name = next().text;
      a->items.push_back(std::move(node));
      return seal(std::move(a));
    }
    if (cur().kind == TokenKind::Int) {
      auto item = make(Expr::Kind::Item, t.line);
      item->items.push_back(std::move(node));
      auto key = make(Expr::Kind::Literal, t.line);
      key->value = Value(next().int_value);
      item->items.push_back(std::move(key));
      return seal(std::move(item));
    }
    unexpected("name");
  }
  // [index], [start:stop:step], or several separated by commas (a tuple index).
  std::vector<ExprPtr> subscripts;
  while (!is_op("]")) {
    if (!subscripts.empty()) expect_op(",");
    subscripts.push_back(parse_subscribed());
  }
  next();
  auto item = make(Expr::Kind::Item, t.line);
  item->items.push_back(std::move(node));
  if (subscripts.size() == 1 && subscripts[0]->kind == Expr::Kind::Slice) {
    subscripts[0]->items[0] = std::move(item->items[0]);
    return seal(std::move(subscripts[0]));
  }
  if (subscripts.size() == 1) {
    item->items.push_back(std::move(subscripts[0]));
  } else {
    auto tuple = make(Expr::Kind::Tuple, t.line);
    tuple->items = std::move(subscripts);
    item->items.push_back(seal(std::move(tuple)));
  }
  return seal(std::move(item));
}

// One subscript: an expression, or a slice whose target (items[0]) the caller fills in.
ExprPtr Parser::parse_subscribed() {
  int line = cur().line;
  ExprPtr parts[3];
  if (!is_op(":")) {
    parts[0] = parse_expression(true);
    if (!is_op(":")) return std::move(parts[0]);
  }
  next();
  if (!is_op("]") && !is_op(",") && !is_op(":")) parts[1] = parse_expression(true);
  if (skip_op(":") && !is_op("]") && !is_op(",")) parts[2] = parse_expression(true);
  auto slice = make(Expr::Kind::Slice, line);
  slice->items.push_back(make(Expr::Kind::Literal, line));  // placeholder for the target
  for (auto& p : parts) slice->items.push_back(std::move(p));
  return slice;
}

// (positional..., name=value..., *args, **kwargs) into `call`.
void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      call.star_args = parse_expression(true);
    } else if (skip_op("**")) {
      call.star_kwargs = parse_expression(true);
    } else if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Operator && peek().text == "=") {
      std::string key = next().text;
      next();
      call.keywords.emplace_back(key, parse_expression(true));
    } else {
      if (!call.keywords.empty() || call.star_args || call.star_kwargs)
        fail_at(cur(), "positional argument follows keyword argument");
      call.items.push_back(parse_expression(true));
    }
  }
  next();
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  NestingGuard guard(*this);
  auto call = make(Expr::Kind::Call, cur().line);
  call->items.push_back(std::move(callee));
  parse_call_args(*call);
  return seal(std::move(call));
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (is_op(".") && peek().kind == TokenKind::Name) {
    next();
    name += "." + next().text;
  }
  return name;
}

// `| name(args) | name ...` applied to `node` ({% filter %} omits the first `|`).
ExprPtr Parser::parse_filter_chain(ExprPtr node, bool leading_pipe) {
  while (!leading_pipe || skip_op("|")) {
    leading_pipe = true;
    NestingGuard guard(*this);
    auto f = make(Expr::Kind::Filter, cur().line);
    f->name = dotted_name();
    f->items.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*f);
    node = seal(std::move(f));
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  NestingGuard guard(*this);
  auto test = make(Expr::Kind::Test, next().line);
  test->negated = skip_name("not");
  test->name = dotted_name();
  test->items.push_back(std::move(node));
  if (is_op("(")) {
    parse_call_args(*test);
  } else if ((cur().kind == TokenKind::Name || cur().kind == TokenKind::String || cur().kind == TokenKind::Int ||
              cur().kind == TokenKind::Float || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail_at(cur(), "You cannot chain multiple tests with is");
    test->items.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
  }
  return seal(std::move(test));
}

}  // namespace corvid::jinja::parser_detail
