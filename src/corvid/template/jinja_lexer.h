// The Jinja2 lexer: splits a template into text and the tokens inside
// {{ }} and {% %} tags, applying jinja2's whitespace rules (`-`/`+` markers,
// trim_blocks, lstrip_blocks), dropping {# comments #} and turning
// {% raw %} blocks into text. Follows jinja2/lexer.py rule for rule, since
// chat templates depend on every whitespace detail.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/template/jinja.h"

namespace corvid::jinja {

enum class TokenKind {
  Text,        // template text outside tags
  PrintBegin,  // {{
  PrintEnd,    // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,      // text holds the unescaped value
  Int,
  Float,
  Operator,    // text holds the operator: "+", "**", "(", ...
  End,         // end of template
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;
  int line = 1;
  std::int64_t int_value = 0;
  double float_value = 0;
};

// Throws TemplateError (line of the problem) on malformed input.
std::vector<Token> tokenize(std::string_view source, const Options& options);

}  // namespace corvid::jinja
