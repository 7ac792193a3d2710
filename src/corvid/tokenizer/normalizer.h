// Normalizers: text rewrites applied to each piece of input that is not an
// added token, before pre-tokenization (HF tokenizers' "normalizer"). Only
// the ids matter to corvid, so offsets are not tracked.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/tokenizer/regex.h"
#include "corvid/tokenizer/unicode.h"
#include "corvid/tokenizer/wordpiece.h"

namespace corvid::tok {

struct NormalizerStep {
  enum class Kind { Unicode, Replace, Prepend, Lowercase, Strip, Bert };
  Kind kind = Kind::Unicode;
  NormalForm form = NormalForm::NFC;      // Unicode
  std::shared_ptr<const Regex> pattern;   // Replace: what to find
  std::string content;                    // Replace: replacement; Prepend: prefix
  bool strip_left = false, strip_right = false;  // Strip
  BertNormalization bert;                        // Bert
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace corvid::tok
