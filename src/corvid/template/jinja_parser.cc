#include "corvid/template/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "corvid/template/jinja_lexer.h"

namespace corvid::jinja {
namespace {

// Bounds the parser's (and so the evaluator's) recursion on nested input.
constexpr int kMaxNesting = 100;
constexpr int kMaxExpressionDepth = 200;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Text: return "template text";
    case TokenKind::PrintBegin: return "'{{'";
    case TokenKind::PrintEnd: return "end of print statement";
    case TokenKind::BlockBegin: return "'{%'";
    case TokenKind::BlockEnd: return "end of statement block";
    case TokenKind::Name: return "'" + t.text + "'";
    case TokenKind::String: return "string";
    case TokenKind::Int: return "integer";
    case TokenKind::Float: return "float";
    case TokenKind::Operator: return "'" + t.text + "'";
    case TokenKind::End: return "end of template";
  }
  return "token";
}

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(std::size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().kind == TokenKind::Operator && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().kind == TokenKind::Name && cur().text == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const { throw TemplateError(t.line, message); }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail_at(cur(), "expected " + expected + ", got " + describe(cur()));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected("'" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::Name) unexpected("a name");
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != TokenKind::BlockEnd) unexpected("end of statement block");
    next();
  }

  struct NestingGuard {
    explicit NestingGuard(Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) parser.fail_at(parser.cur(), "template nesting too deep");
    }
    ~NestingGuard() { --parser.nesting_; }
    Parser& parser;
  };

  // ---- statements ----

  // Parses until a {% tag %} whose name is in `ends` (left unconsumed after
  // the tag's name; `which` receives it) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& which) {
    NestingGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == TokenKind::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TokenKind::PrintBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = t.line;
        s->expr = parse_tuple(true, {});
        if (cur().kind != TokenKind::PrintEnd) unexpected("end of print statement");
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::BlockBegin) {
        next();
        if (cur().kind == TokenKind::Name &&
            std::find(ends.begin(), ends.end(), std::string_view(cur().text)) != ends.end()) {
          which = next().text;
          return body;
        }
        body.push_back(parse_statement());
      } else if (t.kind == TokenKind::End) {
        if (ends.size() == 0) return body;
        std::string expected;
        for (std::string_view e : ends) expected += (expected.empty() ? "'" : " or '") + std::string(e) + "'";
        fail_at(t, "unexpected end of template, expected " + expected);
      } else {
        fail_at(t, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> new_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& t = cur();
    if (t.kind != TokenKind::Name) fail_at(t, "tag name expected");
    const std::string tag = t.text;
    int line = t.line;
    next();
    std::string end;
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") {
      auto s = new_stmt(Stmt::Kind::FilterBlock, line);
      s->expr = parse_filter_chain(make(Expr::Kind::BlockValue, line), false);
      expect_block_end();
      s->body = parse_body({"endfilter"}, end);
      expect_block_end();
      return s;
    }
    if (tag == "with") {
      auto s = new_stmt(Stmt::Kind::With, line);
      while (cur().kind != TokenKind::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(parse_assign_target(false));
        expect_op("=");
        s->values.push_back(parse_expression(true));
      }
      next();
      s->body = parse_body({"endwith"}, end);
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail_at(t, "'" + tag + "' outside of a loop");
      auto s = new_stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
      expect_block_end();
      return s;
    }
    if (tag == "generation") {  // transformers' AssistantTracker: renders its body unchanged
      auto s = new_stmt(Stmt::Kind::Scope, line);
      expect_block_end();
      s->body = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    throw TemplateError(line, "unknown tag '" + tag + "'");
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = new_stmt(Stmt::Kind::If, line);
    std::string end;
    while (true) {
      s->conditions.push_back(parse_tuple(true, {}));
      expect_block_end();
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, end);
      }
      expect_block_end();
      return s;
    }
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = new_stmt(Stmt::Kind::For, line);
    s->target = parse_assign_target(true);
    if (!skip_name("in")) unexpected("'in'");
    s->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    s->recursive = skip_name("recursive");
    expect_block_end();
    std::string end;
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, end);
    --loop_depth_;
    s->uses_loop = s->recursive || mentions(s->body, "loop");
    if (end == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    ExprPtr target;
    if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Operator && peek().text == ".") {
      target = make(Expr::Kind::Attribute, cur().line);
      auto object = make(Expr::Kind::Name, cur().line);
      object->name = next().text;
      next();
      target->name = expect_name();
      target->items.push_back(std::move(object));
    } else {
      target = parse_assign_target(true);
    }
    if (skip_op("=")) {
      auto s = new_stmt(Stmt::Kind::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      expect_block_end();
      return s;
    }
    auto s = new_stmt(Stmt::Kind::SetBlock, line);
    if (target->kind != Expr::Kind::Name) fail_at(cur(), "a block set needs a single name");
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter_chain(make(Expr::Kind::BlockValue, line));
    expect_block_end();
    std::string end;
    s->body = parse_body({"endset"}, end);
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<Param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      else if (!params.empty() && params.back().default_value) fail_at(cur(), "non-default argument follows default argument");
      params.push_back(std::move(p));
    }
    next();
  }

  // Whether `name` is read anywhere in the expression or body (macros bind
  // varargs/kwargs/caller, and loops build `loop`, only when used).
  static bool mentions(const Expr* e, std::string_view name) {
    if (!e) return false;
    if (e->kind == Expr::Kind::Name && e->name == name) return true;
    for (const auto& i : e->items)
      if (mentions(i.get(), name)) return true;
    for (const auto& k : e->keywords)
      if (mentions(k.second.get(), name)) return true;
    return mentions(e->star_args.get(), name) || mentions(e->star_kwargs.get(), name);
  }
  static bool mentions(const Body& body, std::string_view name) {
    for (const auto& s : body) {
      if (mentions(s->expr.get(), name) || mentions(s->condition.get(), name) || mentions(s->body, name) ||
          mentions(s->else_body, name))
        return true;
      for (const auto& c : s->conditions)
        if (mentions(c.get(), name)) return true;
      for (const auto& v : s->values)
        if (mentions(v.get(), name)) return true;
      for (const auto& p : s->params)
        if (mentions(p.default_value.get(), name)) return true;
      for (const auto& b : s->bodies)
        if (mentions(b, name)) return true;
    }
    return false;
  }

  std::unique_ptr<Stmt> parse_macro(int line) {
    auto s = new_stmt(Stmt::Kind::Macro, line);
    s->text = expect_name();
    parse_params(s->params);
    expect_block_end();
    std::string end;
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"}, end);
    loop_depth_ = saved_loop_depth;
    expect_block_end();
    s->uses_varargs = mentions(s->body, "varargs");
    s->uses_kwargs = mentions(s->body, "kwargs");
    s->uses_caller = mentions(s->body, "caller");
    return s;
  }

  std::unique_ptr<Stmt> parse_call_block(int line) {
    auto s = new_stmt(Stmt::Kind::CallBlock, line);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail_at(cur(), "expected call");
    expect_block_end();
    std::string end;
    s->body = parse_body({"endcall"}, end);
    expect_block_end();
    return s;
  }

  // A name, or a tuple of names (nested in parentheses) for unpacking.
  ExprPtr parse_assign_target(bool allow_tuple) {
    NestingGuard guard(*this);
    int line = cur().line;
    auto one = [&]() -> ExprPtr {
      if (skip_op("(")) {
        ExprPtr inner = parse_assign_target(true);
        expect_op(")");
        return inner;
      }
      auto n = make(Expr::Kind::Name, cur().line);
      n->name = expect_name();
      return n;
    };
    ExprPtr first = one();
    if (!allow_tuple || !is_op(",")) return first;
    auto tuple = make(Expr::Kind::Tuple, line);
    tuple->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind != TokenKind::Name && !is_op("(")) break;
      tuple->items.push_back(one());
    }
    return tuple;
  }

  // ---- expressions (precedence as jinja2/parser.py) ----

  // Records a finished node's depth; bounds the tree so that evaluating and
  // destroying it cannot exhaust the stack (`a.b.c...`, `1+1+1...` nest without recursion here).
  ExprPtr seal(ExprPtr e) const {
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

  bool is_tuple_end(std::initializer_list<std::string_view> extra_ends) const {
    if (cur().kind == TokenKind::PrintEnd || cur().kind == TokenKind::BlockEnd || cur().kind == TokenKind::End) return true;
    if (is_op(")")) return true;
    for (std::string_view e : extra_ends)
      if (is_name(e)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_conditional, std::initializer_list<std::string_view> extra_ends) {
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
      if (items.empty()) unexpected("an expression");
      return std::move(items[0]);
    }
    auto t = make(Expr::Kind::Tuple, line);
    t->items = std::move(items);
    return seal(std::move(t));
  }

  ExprPtr parse_expression(bool with_conditional) {
    NestingGuard guard(*this);
    return with_conditional ? parse_conditional() : parse_or();
  }

  ExprPtr parse_conditional() {
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

  ExprPtr binary(Expr::Kind kind, ExprPtr left, ExprPtr right, int line, std::string op = {}) {
    auto b = make(kind, line);
    b->name = std::move(op);
    b->items.push_back(std::move(left));
    b->items.push_back(std::move(right));
    return seal(std::move(b));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = next().line;
      left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = next().line;
      left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      NestingGuard guard(*this);
      auto n = make(Expr::Kind::Not, next().line);
      n->items.push_back(parse_not());
      return seal(std::move(n));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), t.line, t.text);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = make(Expr::Kind::Concat, cur().line);
    c->items.push_back(std::move(first));
    while (skip_op("~")) c->items.push_back(parse_math2());
    return seal(std::move(c));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), t.line, t.text);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& t = next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), t.line, t.text);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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
    fail_at(t, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) node = parse_filter_chain(std::move(node));
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
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
      unexpected("a name or number after '.'");
    }
    // [index] or [start:stop:step]
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (true) {
      if (is_op(":")) {
        next();
        is_slice = true;
        if (++part > 2) unexpected("']'");
        continue;
      }
      if (is_op("]")) break;
      if (parts[part]) unexpected("']'");
      parts[part] = parse_expression(true);
    }
    next();
    if (!is_slice) {
      if (!parts[0]) fail_at(t, "expected an index");
      auto item = make(Expr::Kind::Item, t.line);
      item->items.push_back(std::move(node));
      item->items.push_back(std::move(parts[0]));
      return seal(std::move(item));
    }
    auto slice = make(Expr::Kind::Slice, t.line);
    slice->items.push_back(std::move(node));
    for (auto& p : parts) slice->items.push_back(std::move(p));
    return seal(std::move(slice));
  }

  // (positional..., name=value..., *args, **kwargs) into `call`.
  void parse_call_args(Expr& call) {
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

  ExprPtr parse_call(ExprPtr callee) {
    NestingGuard guard(*this);
    auto call = make(Expr::Kind::Call, cur().line);
    call->items.push_back(std::move(callee));
    parse_call_args(*call);
    return seal(std::move(call));
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().kind == TokenKind::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  // `| name(args) | name ...` applied to `node` ({% filter %} omits the first `|`).
  ExprPtr parse_filter_chain(ExprPtr node, bool leading_pipe = true) {
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

  ExprPtr parse_test(ExprPtr node) {
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

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source, const Options& options) {
  return Parser(tokenize(source, options)).parse();
}

}  // namespace corvid::jinja
