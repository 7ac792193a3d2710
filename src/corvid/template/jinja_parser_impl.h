// The parser's internals, shared by jinja_parser.cc (statements) and
// jinja_parser_expr.cc (expressions). Not for use elsewhere.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/template/jinja_lexer.h"
#include "corvid/template/jinja_parser.h"

namespace corvid::jinja::parser_detail {

// Bounds the parser's (and so the evaluator's) recursion on nested input.
constexpr int kMaxNesting = 100;
constexpr int kMaxExpressionDepth = 200;

std::string describe(const Token& t);
ExprPtr make(Expr::Kind kind, int line);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Body parse();

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
    std::string message = "expected token '";  // jinja2's wording
    message.append(expected).append("', got '").append(describe(cur())).append("'");
    fail_at(cur(), message);
  }
  void expect_op(std::string_view op) {
    if (skip_op(op)) return;
    unexpected(std::string(op));
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::Name) unexpected("name");
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

  // ---- statements (jinja_parser.cc) ----
  // Parses until a {% tag %} whose name is in `ends` (left unconsumed after
  // the tag's name; `which` receives it) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& which);
  std::unique_ptr<Stmt> new_stmt(Stmt::Kind kind, int line);
  std::unique_ptr<Stmt> parse_statement();
  std::unique_ptr<Stmt> parse_if(int line);
  std::unique_ptr<Stmt> parse_for(int line);
  std::unique_ptr<Stmt> parse_set(int line);
  void parse_params(std::vector<Param>& params);
  // Whether `name` is read anywhere in the expression or body (macros bind
  // varargs/kwargs/caller, and loops build `loop`, only when used).
  static bool mentions(const Expr* e, std::string_view name);
  static bool mentions(const Body& body, std::string_view name);
  std::unique_ptr<Stmt> parse_macro(int line);
  std::unique_ptr<Stmt> parse_call_block(int line);
  // A name, or a tuple of names (nested in parentheses) for unpacking.
  ExprPtr parse_assign_target(bool allow_tuple);

  // ---- expressions (jinja_parser_expr.cc; precedence as jinja2/parser.py) ----
  // Records a finished node's depth; bounds the tree so that evaluating and
  // destroying it cannot exhaust the stack (`a.b.c...`, `1+1+1...` nest without recursion here).
  ExprPtr seal(ExprPtr e) const;
  bool is_tuple_end(std::initializer_list<std::string_view> extra_ends) const;
  ExprPtr parse_tuple(bool with_conditional, std::initializer_list<std::string_view> extra_ends);
  ExprPtr parse_expression(bool with_conditional);
  ExprPtr parse_conditional();
  ExprPtr binary(Expr::Kind kind, ExprPtr left, ExprPtr right, int line, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  // (positional..., name=value..., *args, **kwargs) into `call`.
  void parse_call_args(Expr& call);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  // `| name(args) | name ...` applied to `node` ({% filter %} omits the first `|`).
  ExprPtr parse_filter_chain(ExprPtr node, bool leading_pipe = true);
  ExprPtr parse_test(ExprPtr node);

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> open_tags_;  // the statements being parsed, innermost last
};

}  // namespace corvid::jinja::parser_detail
