// Python str semantics on UTF-8 text: templates index, slice, measure and
// case-map strings by code point, as Python does. Bytes that are not valid
// UTF-8 decode to U+DC80..U+DCFF (Python's surrogateescape) and encode back to
// the same byte, so text passes through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace corvid::jinja::unicode {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view code_points);
void append(std::string& out, char32_t code_point);
std::size_t length(std::string_view utf8);  // code points

// Full Unicode case mappings, as str.upper()/lower()/title()/capitalize().
std::string upper(std::string_view utf8);
std::string lower(std::string_view utf8);
std::string title(std::string_view utf8);       // str.title(): word starts after an uncased char
std::string capitalize(std::string_view utf8);  // str.capitalize()
std::string casefold(std::string_view utf8);    // str.casefold()
std::string swapcase(std::string_view utf8);    // str.swapcase()

// Python's character classes (str.isspace() etc. for one code point).
bool is_space(char32_t c);
bool is_line_break(char32_t c);  // what str.splitlines() splits on
bool is_cased(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_titlecase(char32_t c);  // category Lt
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_decimal(char32_t c);
bool is_numeric(char32_t c);
bool is_printable(char32_t c);  // what repr() leaves unescaped
int decimal_value(char32_t c);  // 0-9 for a Unicode decimal digit (Nd), else -1

}  // namespace corvid::jinja::unicode
