// UTF-8 and Unicode helpers shared by the tokenizer stages: code point
// decoding, the GPT-2 byte-level alphabet, Unicode normalization (ICU),
// and an incremental UTF-8 repair that matches Rust's from_utf8_lossy,
// because Hugging Face tokenizers (Rust) is the oracle for decoded text.
// What counts as well-formed UTF-8 is decided in core/utf8.h, which the
// Jinja engine shares; here an ill-formed byte becomes U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace corvid::tok {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at s[i]. Returns its byte length (>= 1);
// an ill-formed sequence yields length 1 and *cp = kReplacementChar.
size_t utf8_next(std::string_view s, size_t i, uint32_t* cp);
void utf8_append(std::string& out, uint32_t cp);
bool utf8_valid(std::string_view s);
// Replaces each maximal ill-formed subpart with U+FFFD (same rule as Rust's
// String::from_utf8_lossy). Returns the input unchanged when it is valid.
std::string utf8_sanitize(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space) and char::is_alphanumeric.
bool is_whitespace(uint32_t cp);
bool is_alphanumeric(uint32_t cp);

// GPT-2 byte-level alphabet: every byte maps to one printable code point.
// byte_to_unicode(b) is that code point's UTF-8; unicode_to_byte(cp) is the
// inverse, or -1 when cp is not in the alphabet.
const std::string& byte_to_unicode(uint8_t b);
int unicode_to_byte(uint32_t cp);
// Maps every byte of s into the byte-level alphabet.
std::string to_byte_level(std::string_view s);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Unicode normalization of valid UTF-8 (ICU). ASCII input is returned as is.
std::string normalize_unicode(std::string_view s, NormalForm form);

// Incremental from_utf8_lossy: push() appends the complete characters of
// the byte stream so far (ill-formed subparts as U+FFFD) and keeps an
// unfinished trailing sequence; finish() turns a leftover into U+FFFD.
// Concatenated output equals from_utf8_lossy(all bytes).
class Utf8Repair {
 public:
  void push(std::string_view bytes, std::string& out);
  void finish(std::string& out);

 private:
  std::string pending_;  // an incomplete but so-far well-formed sequence (< 4 bytes)
};

}  // namespace corvid::tok
