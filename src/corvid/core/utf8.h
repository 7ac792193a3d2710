// UTF-8 decoding and encoding by the well-formedness rules of the Unicode
// standard (Table 3-7). The tokenizer (which repairs ill-formed bytes to
// U+FFFD, as Hugging Face does) and the Jinja engine (which keeps them as
// Python's surrogateescape does) differ only in what they do with a bad byte,
// so deciding what is well-formed lives here, once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace corvid::utf8 {

enum class SeqStatus { Valid, Invalid, Incomplete };

// Classifies the sequence starting at s[i] (i < s.size()). *len is the
// sequence length when Valid, the length of the maximal ill-formed subpart
// when Invalid, and the bytes present when Incomplete (cut off by the end).
SeqStatus classify(std::string_view s, std::size_t i, std::size_t* len);

// Decodes the well-formed sequence at s[i] into *cp and returns its length;
// returns 0 (leaving *cp alone) when the bytes at i are ill-formed or cut off.
std::size_t decode(std::string_view s, std::size_t i, char32_t* cp);

// Appends the encoding of cp (<= U+10FFFF). A surrogate code point gets the
// 3-byte form, as Python's "surrogatepass" writes a lone \ud83d.
void append(std::string& out, char32_t cp);

bool is_valid(std::string_view s);

}  // namespace corvid::utf8
