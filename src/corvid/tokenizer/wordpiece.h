// The WordPiece model (BERT's; HF tokenizers' "WordPiece"): each pre-tokenized word
// becomes its longest vocabulary prefix, then the longest "##"-prefixed token of what
// is left, and so on; a word with no such split, or longer than max_chars characters,
// is one unknown token. It shares BpeModel's vocabulary table (id <-> text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/tokenizer/bpe.h"

namespace corvid::tok {

struct WordPieceOptions {
  int32_t unk_id = -1;
  std::string prefix = "##";  // continuing_subword_prefix
  size_t max_chars = 100;     // max_input_chars_per_word
};

void wordpiece_encode(const BpeModel& vocab, const WordPieceOptions& options, std::string_view word,
                      std::vector<int32_t>& out);

// BERT's text cleanup (HF BertNormalizer), in its order: control characters dropped
// and whitespace made ' ' (clean_text), CJK ideographs set apart with spaces
// (chinese), accents removed (NFD, then nonspacing marks dropped), lowercased.
struct BertNormalization {
  bool clean_text = true, chinese = true, strip_accents = true, lowercase = true;
};
std::string bert_normalize(std::string_view text, const BertNormalization& options);

// A character HF's BertPreTokenizer sets apart as a word of its own: ASCII punctuation,
// or a P* character of Unicode 8.0 (the version of HF's category tables).
bool is_bert_punctuation(uint32_t cp);

}  // namespace corvid::tok
