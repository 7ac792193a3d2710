// The BPE model: turns one pre-tokenized word into token ids.
//
// Two merge orders are supported:
//  - Ranked merges (HF tokenizers' BPE, GGUF "gpt2"): repeatedly apply the
//    lowest-ranked merge present in the word, leftmost first.
//  - Scored merges (SentencePiece as llama.cpp runs GGUF "llama" vocabs):
//    repeatedly merge the adjacent pair whose concatenation is a vocabulary
//    token of highest score, leftmost first.
// Both run in O(n log n) with a heap over candidate pairs and a linked list
// of symbols; results for short words are cached (pre-tokenized text repeats
// the same words constantly).
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace corvid::tok {

// Lets maps keyed by std::string be searched with a string_view, without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct BpeOptions {
  bool byte_fallback = false;   // unknown chars become <0xNN> byte tokens
  bool fuse_unk = false;        // consecutive unknown chars share one unk token
  int32_t unk_id = -1;          // -1: unknown chars are dropped (HF behaviour without unk_token)
  bool ignore_merges = false;   // a word that is itself a token is emitted as is
  std::string continuing_subword_prefix;  // rarely used (e.g. "##"); empty for all supported models
  std::string end_of_word_suffix;
  bool score_merges = false;    // SentencePiece-style merging by token score
};

class BpeModel {
 public:
  BpeModel() = default;
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Vocabulary (id -> token text). Ids may have holes (empty strings, not in the map).
  void set_vocab(std::vector<std::string> tokens);
  // Ranked merge number `rank` of tokens a and b; returns false when a, b or a+b is not a token.
  bool add_merge(std::string_view a, std::string_view b, int32_t rank);
  // Scored merging: score per id, and which ids may be produced by a merge.
  void set_scores(std::vector<float> scores, std::vector<bool> mergeable);
  void set_options(BpeOptions options);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  int32_t find(std::string_view token) const {
    auto it = token_to_id_.find(token);
    return it == token_to_id_.end() ? -1 : it->second;
  }
  const std::vector<std::string>& tokens() const { return id_to_token_; }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void encode_ranked(std::string_view word, std::vector<int32_t>& out) const;
  void encode_scored(std::string_view word, std::vector<int32_t>& out) const;
  void push_bytes(std::string_view chars, std::vector<int32_t>& out) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<float> scores_;
  std::vector<bool> mergeable_;
  std::array<int32_t, 256> byte_ids_{};  // id of "<0xNN>", or -1
  BpeOptions options_;

  // Word cache; guarded because encode is const and may run on many threads.
  static constexpr size_t kMaxCachedWordBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace corvid::tok
