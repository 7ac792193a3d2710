// Pre-tokenizers: split normalized text into words that the BPE model
// encodes independently (HF tokenizers' "pre_tokenizer"). A word never
// spans two pieces, so the split decides which merges can happen.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/tokenizer/regex.h"

namespace corvid::tok {

// What happens to the text a pattern matches (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The GPT-2 pattern that HF's ByteLevel pre-tokenizer uses when use_regex is on.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Metaspace, BertPunctuation };  // the last: each punctuation char isolated
  Kind kind = Kind::Split;
  // Split (Digits is a Split on \p{N}; ByteLevel with use_regex carries the GPT-2 pattern).
  std::shared_ptr<const Regex> pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  // ByteLevel / Metaspace: prefix a space (or the replacement) to words that lack one.
  bool add_prefix_space = false;
  // Metaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  bool prepend_first_only = false;           // prepend_scheme "first"
  bool split = true;
};

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // Splits `text` into words (byte-level mapped when a ByteLevel step is present).
  // `first_piece` is true for the piece at the start of the input (Metaspace "first").
  void split(std::string_view text, bool first_piece, std::vector<std::string>& words) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace corvid::tok
