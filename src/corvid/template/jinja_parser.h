// The Jinja2 syntax tree and parser. The grammar, operator precedence and
// statement forms follow jinja2/parser.py; a Program is immutable once parsed
// so one template can render from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corvid/template/jinja.h"
#include "corvid/template/jinja_value.h"

namespace corvid::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,     // value
    Name,        // name
    List,        // items
    Tuple,       // items (a Python tuple; evaluates to a list)
    Dict,        // items: key, value, key, value, ...
    Attribute,   // items[0].name
    Item,        // items[0][items[1]]
    Slice,       // items[0][items[1]:items[2]:items[3]] (absent parts are null)
    Call,        // items[0](items[1..], keywords)
    Filter,      // items[0] | name(items[1..], keywords)
    Test,        // items[0] is [not] name(items[1..], keywords); negated
    Not,         // not items[0]
    Negate,      // -items[0]
    Plus,        // +items[0]
    Binary,      // items[0] op items[1]: + - * / // % **
    And,         // items[0] and items[1]
    Or,          // items[0] or items[1]
    Compare,     // items[0] ops[0] items[1] ops[1] items[2] ... (chained)
    Concat,      // items[0] ~ items[1] ~ ...
    Conditional, // items[1] if items[0] else items[2] (items[2] may be null)
    BlockValue,  // the rendered body of {% filter %} / {% set x | f %}
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // of the subtree, bounded by the parser
  Value value;
  std::string name;  // Name, Attribute, Filter, Test; the operator of Binary
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr star_args, star_kwargs;  // f(*a, **k)
  std::vector<std::string> ops;    // Compare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  bool negated = false;            // Test
  // Filter/Test: not a known one, which jinja2 lets pass where it defers the
  // check to run time (inside `if` and conditional expressions).
  bool unknown = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    Text,        // text
    Print,       // expr
    If,          // conditions[i] -> bodies[i]; else_body
    For,         // target in expr [if condition] body [else else_body]; recursive
    Set,         // target = expr
    SetBlock,    // target = rendered body, through expr (a filter chain over BlockValue) if set
    Macro,       // name(params) body
    CallBlock,   // {% call(params) expr %} body
    FilterBlock, // expr (a filter chain over BlockValue) applied to body
    With,        // targets[i] = values[i]; body
    Break,
    Continue,
    Scope,       // body in its own scope ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;  // Text; Macro name
  ExprPtr expr;
  ExprPtr target;    // For, Set, SetBlock: Name, Tuple of targets, or Attribute of a Name (namespace)
  ExprPtr condition; // For's filter
  std::vector<ExprPtr> conditions;  // If
  std::vector<Body> bodies;         // If
  std::vector<ExprPtr> targets, values;  // With
  Body body, else_body;
  std::vector<Param> params;        // Macro, CallBlock
  bool recursive = false;           // For
  bool uses_loop = false;           // For: the body reads `loop`
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;  // Macro, CallBlock
};

struct Template::Program {
  Body body;
  Options options;
};

// Throws TemplateError naming the line of the first problem.
Body parse_template(std::string_view source, const Options& options);

}  // namespace corvid::jinja
