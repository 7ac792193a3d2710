#include "corvid/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "corvid/tokenizer/unicode.h"
#include "corvid/tokenizer/wordpiece.h"

namespace corvid::tok {
namespace {

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Applies HF's split semantics: matches and the gaps between them become
// segments, which the behavior then drops or glues to their neighbours.
void split_by_pattern(std::string_view text, const Regex& pattern, SplitBehavior behavior, bool invert,
                      std::vector<std::string>& out) {
  std::vector<std::pair<size_t, size_t>> matches;
  pattern.find_all(text, matches);
  std::vector<Segment> segs;
  segs.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) segs.push_back({prev, b, false});
    segs.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.size()) segs.push_back({prev, text.size(), false});
  if (invert) {
    for (auto& s : segs) s.is_match = !s.is_match;
  }

  std::vector<Segment> merged;
  merged.reserve(segs.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated: merged = segs; break;
    case SplitBehavior::Removed:
      for (const auto& s : segs) {
        if (!s.is_match) merged.push_back(s);
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& s : segs) {
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      // Mirror image of MergedWithPrevious: walk from the end.
      for (size_t k = segs.size(); k-- > 0;) {
        const auto& s = segs[k];
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = s.begin;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::Contiguous:
      for (size_t k = 0; k < segs.size(); ++k) {
        const auto& s = segs[k];
        if (k > 0 && s.is_match == previous_match) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (const auto& s : merged) {
    if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  }
}

std::string replace_spaces(std::string_view s, const std::string& replacement) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ') {
      out += replacement;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void PreTokenizer::split(std::string_view text, bool first_piece, std::vector<std::string>& words) const {
  std::vector<std::string> pieces;
  pieces.emplace_back(text);
  std::vector<std::string> next;
  for (const auto& step : steps_) {
    next.clear();
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string& piece = pieces[k];
      switch (step.kind) {
        case PreTokenizerStep::Kind::Split:
          split_by_pattern(piece, *step.pattern, step.behavior, step.invert, next);
          break;
        case PreTokenizerStep::Kind::ByteLevel: {
          if (step.add_prefix_space && !piece.empty() && piece[0] != ' ') piece.insert(piece.begin(), ' ');
          size_t from = next.size();
          if (step.pattern) {
            split_by_pattern(piece, *step.pattern, SplitBehavior::Isolated, false, next);
          } else if (!piece.empty()) {
            next.push_back(piece);
          }
          for (size_t j = from; j < next.size(); ++j) next[j] = to_byte_level(next[j]);
          break;
        }
        case PreTokenizerStep::Kind::BertPunctuation: {
          size_t word = 0;
          uint32_t cp = 0;
          for (size_t i = 0, n = 0; i < piece.size(); i += n) {
            n = utf8_next(piece, i, &cp);
            if (!is_bert_punctuation(cp)) continue;
            if (i > word) next.push_back(piece.substr(word, i - word));
            next.push_back(piece.substr(i, n));
            word = i + n;
          }
          if (word < piece.size()) next.push_back(piece.substr(word));
          break;
        }
        case PreTokenizerStep::Kind::Metaspace: {
          std::string s = replace_spaces(piece, step.replacement);
          bool prepend = step.add_prefix_space && (!step.prepend_first_only || (first_piece && k == 0));
          if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0) s = step.replacement + s;
          if (step.split && step.pattern) {
            split_by_pattern(s, *step.pattern, SplitBehavior::MergedWithNext, false, next);
          } else if (!s.empty()) {
            next.push_back(std::move(s));
          }
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (auto& p : pieces) {
    if (!p.empty()) words.push_back(std::move(p));
  }
}

}  // namespace corvid::tok
