// PCRE2 (UTF + UCP, JIT) wrapper for the pre-tokenizer patterns.
//
// Hugging Face tokenizers compiles its patterns with Oniguruma; PCRE2 agrees
// on every construct these patterns use except \s: Oniguruma's \s is the
// Unicode White_Space property, which includes U+0085 (NEL), while PCRE2's
// UCP \s does not. translate_hf_regex() adds it back.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corvid::tok {

std::string translate_hf_regex(std::string_view pattern);

class Regex {
 public:
  // `pattern` is PCRE2 syntax; throws corvid::Error naming `where` if it does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all non-overlapping matches,
  // left to right (empty matches are skipped). Throws corvid::Error if `text`
  // is not valid UTF-8 (callers sanitize first).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// A literal string pattern (HF's {"String": ...}) as a regex.
std::string regex_escape(std::string_view literal);

}  // namespace corvid::tok
