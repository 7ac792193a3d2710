#include "corvid/template/jinja_parser.h"

#include <algorithm>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_parser_impl.h"

namespace corvid::jinja {
namespace parser_detail {


// jinja2's describe_token: a name's text, an operator itself, else the kind.
std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Text: return "template data";
    case TokenKind::PrintBegin: return "begin of print statement";
    case TokenKind::PrintEnd: return "end of print statement";
    case TokenKind::BlockBegin: return "begin of statement block";
    case TokenKind::BlockEnd: return "end of statement block";
    case TokenKind::Name: return t.text;
    case TokenKind::String: return "string";
    case TokenKind::Int: return "integer";
    case TokenKind::Float: return "float";
    case TokenKind::Operator: return t.text;
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

Body Parser::parse() {
  std::string end;
  return parse_body({}, end);
}

// Parses until a {% tag %} whose name is in `ends` (left unconsumed after
// the tag's name; `which` receives it) or the end of the template.
Body Parser::parse_body(std::initializer_list<std::string_view> ends, std::string& which) {
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
      std::string message = "Unexpected end of template. Jinja was looking for the following tags: ";
      bool first = true;
      for (std::string_view e : ends) {
        message.append(first ? "'" : " or '").append(e).append("'");
        first = false;
      }
      message.append(". The innermost block that needs to be closed is '").append(open_tags_.back()).append("'.");
      fail_at(t, message);
    } else {
      fail_at(t, "unexpected '" + describe(t) + "'");
    }
  }
}

std::unique_ptr<Stmt> Parser::new_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

std::unique_ptr<Stmt> Parser::parse_statement() {
  const Token& t = cur();
  if (t.kind != TokenKind::Name) fail_at(t, "tag name expected");
  const std::string tag = t.text;
  int line = t.line;
  next();
  open_tags_.push_back(tag);
  struct Pop {
    std::vector<std::string>& tags;
    ~Pop() { tags.pop_back(); }
  } pop{open_tags_};
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

std::unique_ptr<Stmt> Parser::parse_if(int line) {
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

std::unique_ptr<Stmt> Parser::parse_for(int line) {
  auto s = new_stmt(Stmt::Kind::For, line);
  s->target = parse_assign_target(true);
  if (!skip_name("in")) unexpected("in");
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

std::unique_ptr<Stmt> Parser::parse_set(int line) {
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

void Parser::parse_params(std::vector<Param>& params) {
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
bool Parser::mentions(const Expr* e, std::string_view name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::Name && e->name == name) return true;
  for (const auto& i : e->items)
    if (mentions(i.get(), name)) return true;
  for (const auto& k : e->keywords)
    if (mentions(k.second.get(), name)) return true;
  return mentions(e->star_args.get(), name) || mentions(e->star_kwargs.get(), name);
}

bool Parser::mentions(const Body& body, std::string_view name) {
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

std::unique_ptr<Stmt> Parser::parse_macro(int line) {
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

std::unique_ptr<Stmt> Parser::parse_call_block(int line) {
  auto s = new_stmt(Stmt::Kind::CallBlock, line);
  if (is_op("(")) parse_params(s->params);
  s->expr = parse_expression(true);
  if (s->expr->kind != Expr::Kind::Call) fail_at(cur(), "expected call");
  expect_block_end();
  std::string end;
  s->body = parse_body({"endcall"}, end);
  expect_block_end();
  // The body is the caller() macro: it takes varargs/kwargs/caller like any macro.
  s->uses_varargs = mentions(s->body, "varargs");
  s->uses_kwargs = mentions(s->body, "kwargs");
  s->uses_caller = mentions(s->body, "caller");
  return s;
}

// A name, or a tuple of names (nested in parentheses) for unpacking.
ExprPtr Parser::parse_assign_target(bool allow_tuple) {
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

// jinja2 rejects an unknown filter or test when it compiles the template,
// except inside an `if` or a conditional expression ("soft" frames), where
// the error waits until the filter runs. Scopes of their own (loop bodies,
// macros, blocks) are not soft again.
void check_callables(Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == Expr::Kind::Conditional) soft = true;
  bool is_filter = e->kind == Expr::Kind::Filter;
  if ((is_filter && !has_filter(e->name)) || (e->kind == Expr::Kind::Test && !has_test(e->name))) {
    if (!soft) {
      std::string message = is_filter ? "No filter named '" : "No test named '";
      message.append(e->name).append("'.");
      throw TemplateError(e->line, message);
    }
    e->unknown = true;
  }
  for (auto& item : e->items) check_callables(item.get(), soft);
  for (auto& keyword : e->keywords) check_callables(keyword.second.get(), soft);
  check_callables(e->star_args.get(), soft);
  check_callables(e->star_kwargs.get(), soft);
}

void check_callables(Body& body, bool soft) {
  for (auto& s : body) {
    bool inner_soft = soft;    // expressions evaluated in the statement's own scope
    bool scope_soft = false;   // its body, when the statement opens a scope
    switch (s->kind) {
      case Stmt::Kind::If:
        for (auto& c : s->conditions) check_callables(c.get(), true);
        for (auto& b : s->bodies) check_callables(b, true);
        check_callables(s->else_body, true);
        continue;
      case Stmt::Kind::For:
        check_callables(s->condition.get(), false);
        check_callables(s->else_body, soft);
        break;
      case Stmt::Kind::Macro:
      case Stmt::Kind::FilterBlock:
      case Stmt::Kind::SetBlock:
        inner_soft = false;
        break;
      default:
        break;
    }
    check_callables(s->expr.get(), inner_soft);
    for (auto& v : s->values) check_callables(v.get(), soft);
    for (auto& p : s->params) check_callables(p.default_value.get(), false);
    bool opens_scope = s->kind == Stmt::Kind::For || s->kind == Stmt::Kind::Macro || s->kind == Stmt::Kind::CallBlock ||
                       s->kind == Stmt::Kind::FilterBlock || s->kind == Stmt::Kind::SetBlock ||
                       s->kind == Stmt::Kind::With || s->kind == Stmt::Kind::Scope;
    check_callables(s->body, opens_scope ? scope_soft : soft);
  }
}

}  // namespace parser_detail

Body parse_template(std::string_view source, const Options& options) {
  Body body = parser_detail::Parser(tokenize(source, options)).parse();
  parser_detail::check_callables(body, false);
  return body;
}

}  // namespace corvid::jinja
