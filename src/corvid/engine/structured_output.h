// Structured output: a format a request's text must follow (any JSON, a JSON schema,
// a regex, an EBNF grammar), compiled against the model's vocabulary into a matcher
// that says, before each token, which tokens may come next. The automaton and the
// token masks are XGrammar's (its C++ core, built by scripts/build-xgrammar.sh); only
// structured_output.cc sees its headers.
//
// A FormatCompiler belongs to a model's tokenizer and caches what it compiled (the
// same schema twice costs one compile). It is thread-safe: the server compiles on its
// worker threads, so the engine thread never waits for a compile. A FormatMatcher is
// one sequence's position in its format.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

struct OutputFormat {
  enum class Kind {
    Json,        // any JSON value (OpenAI's json_object: an object)
    JsonSchema,  // `spec`: a JSON Schema document
    Regex,       // `spec`: a regular expression the whole text matches
    Grammar,     // `spec`: an EBNF grammar (XGrammar's, GBNF-like), its root rule `root`
  };
  Kind kind = Kind::Json;
  std::string spec = {};
  bool object_only = false;  // Json: the value must be an object
  // JSON: the compact form (", " and ": " between items), or with any_whitespace free
  // whitespace between tokens in runs of at most 20. Compact is the default because free
  // whitespace lets a model pad with blank lines until max_tokens cuts the JSON short
  // (SmolLM2 does, asked for JSON after a prompt about something else).
  bool any_whitespace = false;
  std::string describe() const;  // "json_schema", "regex", ...
};

class CompiledFormat;  // XGrammar's compiled grammar over one vocabulary

class FormatCompiler {
 public:
  // `vocab_size`: the model's (the logits' width; ids past the tokenizer's are never
  // allowed). Special tokens are never allowed inside a format.
  FormatCompiler(const Tokenizer& tokenizer, int64_t vocab_size);
  ~FormatCompiler();
  FormatCompiler(const FormatCompiler&) = delete;
  FormatCompiler& operator=(const FormatCompiler&) = delete;

  // Throws corvid::Error with the reason for a malformed schema, regex or grammar.
  std::shared_ptr<const CompiledFormat> compile(const OutputFormat& format) const;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_;
};

class FormatMatcher {
 public:
  // `stop_ids`: the tokens that end this sequence; once the format is complete only
  // they may come.
  FormatMatcher(std::shared_ptr<const CompiledFormat> format, std::span<const int32_t> stop_ids);
  ~FormatMatcher();
  FormatMatcher(FormatMatcher&&) noexcept;
  FormatMatcher& operator=(FormatMatcher&&) noexcept;

  // 32-bit words in a mask over `vocab_size` tokens.
  static int64_t mask_words(int64_t vocab_size);
  // Writes the next token's mask (bit t % 32 of word t / 32 set: token t allowed) into
  // `mask` (mask_words(vocab) words). Returns false when every token is allowed.
  bool fill_mask(std::span<int32_t> mask);
  // Advances past `token`; false (and no change) when the format does not allow it.
  bool accept(int32_t token);
  // The format is complete: only a stop token may follow.
  bool complete() const;
  // A stop token was accepted after completion.
  bool terminated() const;

 private:
  friend class MaskFiller;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Fills many sequences' masks at once, split over up to `threads` threads (XGrammar's
// batch matcher): what one step's constrained rows need.
class MaskFiller {
 public:
  explicit MaskFiller(int threads);
  ~MaskFiller();
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;
  // masks: [matchers.size(), words] (words = FormatMatcher::mask_words(vocab)), row i
  // for matchers[i].
  void fill(std::span<FormatMatcher* const> matchers, std::span<int32_t> masks, int64_t words);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corvid
