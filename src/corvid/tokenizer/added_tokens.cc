#include "corvid/tokenizer/added_tokens.h"

#include <algorithm>

#include "corvid/tokenizer/unicode.h"

namespace corvid::tok {
namespace {

// The code point that ends at byte `end` (exclusive), or 0 at the start.
uint32_t char_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t b = end - 1;
  while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  uint32_t cp;
  utf8_next(s, b, &cp);
  return cp;
}

uint32_t char_at(std::string_view s, size_t begin) {
  if (begin >= s.size()) return 0;
  uint32_t cp;
  utf8_next(s, begin, &cp);
  return cp;
}

// Regex \w as Rust's regex crate understands it (close enough for single_word).
bool is_word_char(uint32_t cp) { return cp == '_' || (cp != 0 && is_alphanumeric(cp)); }

}  // namespace

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens) {
  nodes_.assign(1, Node{});
  tokens_.clear();
  for (const auto& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (char c : t.content) {
      auto b = static_cast<uint8_t>(c);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& kids = nodes_[node].children;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1})),
                    std::make_pair(b, next));
      }
      node = next;
    }
    if (nodes_[node].token < 0) {  // the first of duplicate contents wins
      nodes_[node].token = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(&t);
    }
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto& kids = nodes_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(byte, int32_t{-1}));
  return it != kids.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& out) const {
  size_t emitted = 0;  // end of what has been pushed to `out`
  size_t pos = 0;
  while (!empty() && pos < text.size()) {
    // Longest token starting at pos.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = *tokens_[best];
    size_t start = pos, stop = best_end;
    pos = best_end;  // a rejected match still consumes its span, as in HF's match iterator
    if (tok.single_word && (is_word_char(char_before(text, start)) || is_word_char(char_at(text, stop)))) continue;
    if (tok.lstrip) {
      while (start > emitted) {
        size_t b = start - 1;
        while (b > emitted && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
        uint32_t cp;
        utf8_next(text, b, &cp);
        if (!is_whitespace(cp)) break;
        start = b;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        uint32_t cp;
        size_t n = utf8_next(text, stop, &cp);
        if (!is_whitespace(cp)) break;
        stop += n;
      }
      pos = stop;
    }
    if (emitted < start) out.push_back({emitted, start, -1});
    out.push_back({start, stop, tok.id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({emitted, text.size(), -1});
}

}  // namespace corvid::tok
