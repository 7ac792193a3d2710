// Added tokens (special and user-defined) are cut out of the input before
// normalization and BPE, so "<|im_start|>" in a prompt becomes one id.
// Matching follows HF tokenizers: leftmost-longest over all tokens, with the
// per-token flags single_word (no word character on either side), lstrip and
// rstrip (swallow neighbouring whitespace). Tokens flagged `normalized` are
// matched against normalized text, the others against the raw input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace corvid::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;
};

// A piece of input: either plain text [begin, end) or an added token.
struct TextPiece {
  size_t begin = 0, end = 0;
  int32_t token_id = -1;  // -1: plain text
};

// Leftmost-longest matcher over one set of tokens (a byte trie).
class AddedTokenMatcher {
 public:
  void build(const std::vector<AddedToken>& tokens);  // keeps pointers into `tokens`
  bool empty() const { return nodes_.size() <= 1; }
  // Splits `text` into plain pieces and token pieces, in order.
  void split(std::string_view text, std::vector<TextPiece>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                  // index into tokens_
  };
  int32_t child(int32_t node, uint8_t byte) const;
  std::vector<Node> nodes_;
  std::vector<const AddedToken*> tokens_;
};

}  // namespace corvid::tok
