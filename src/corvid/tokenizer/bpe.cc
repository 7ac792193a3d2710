#include "corvid/tokenizer/bpe.h"

#include <cstdio>
#include <queue>

namespace corvid::tok {
namespace {

// Byte length of the UTF-8 sequence led by `lead` (words are valid UTF-8,
// but stay in bounds regardless).
size_t char_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t begin, len;  // byte range in the word
};

}  // namespace

void BpeModel::set_vocab(std::vector<std::string> tokens) {
  id_to_token_ = std::move(tokens);
  token_to_id_.clear();
  token_to_id_.reserve(id_to_token_.size());
  for (size_t i = 0; i < id_to_token_.size(); ++i) {
    if (!id_to_token_[i].empty()) token_to_id_.emplace(id_to_token_[i], static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = find(name);
  }
}

bool BpeModel::add_merge(std::string_view a, std::string_view b, int32_t rank) {
  int32_t ia = find(a), ib = find(b);
  if (ia < 0 || ib < 0) return false;
  std::string joined(a);
  std::string_view tail = b;
  // With a continuing-subword prefix, the right part carries it but the merged token does not repeat it.
  const auto& prefix = options_.continuing_subword_prefix;
  if (!prefix.empty() && tail.substr(0, prefix.size()) == prefix) tail.remove_prefix(prefix.size());
  joined.append(tail);
  int32_t merged = find(joined);
  if (merged < 0) return false;
  merges_.try_emplace(pair_key(ia, ib), Merge{rank, merged});
  return true;
}

void BpeModel::set_scores(std::vector<float> scores, std::vector<bool> mergeable) {
  scores_ = std::move(scores);
  mergeable_ = std::move(mergeable);
}

void BpeModel::set_options(BpeOptions options) { options_ = std::move(options); }

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  if (options_.score_merges) {
    encode_scored(word, out);
  } else {
    encode_ranked(word, out);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(start), out.end()));
  }
}

void BpeModel::push_bytes(std::string_view chars, std::vector<int32_t>& out) const {
  for (char c : chars) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (options_.unk_id >= 0) {
      out.push_back(options_.unk_id);
    }
  }
}

void BpeModel::encode_ranked(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  // 1. One symbol per character (or per byte, with byte fallback).
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id, size_t begin, size_t len) {
    int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({id, idx - 1, -1, static_cast<uint32_t>(begin), static_cast<uint32_t>(len)});
    if (idx > 0) syms[idx - 1].next = idx;
  };
  int32_t unk_begin = -1;  // pending unknown run (byte offset), emitted lazily so it can be fused
  size_t unk_len = 0;
  auto flush_unk = [&]() {
    if (unk_begin >= 0) add(options_.unk_id, static_cast<size_t>(unk_begin), unk_len);
    unk_begin = -1;
  };
  const auto& prefix = options_.continuing_subword_prefix;
  const auto& suffix = options_.end_of_word_suffix;
  std::string key;
  for (size_t i = 0; i < word.size();) {
    size_t n = std::min(char_len(static_cast<uint8_t>(word[i])), word.size() - i);
    std::string_view ch = word.substr(i, n);
    int32_t id;
    if (prefix.empty() && suffix.empty()) {
      id = find(ch);
    } else {
      key.assign(i > 0 ? prefix : std::string());
      key.append(ch);
      if (i + n == word.size()) key.append(suffix);
      id = find(key);
    }
    if (id >= 0) {
      flush_unk();
      add(id, i, n);
    } else if (options_.byte_fallback && [&] {
                 for (char c : ch) {
                   if (byte_ids_[static_cast<uint8_t>(c)] < 0) return false;
                 }
                 return true;
               }()) {
      flush_unk();
      for (size_t k = 0; k < n; ++k) add(byte_ids_[static_cast<uint8_t>(ch[k])], i + k, 1);
    } else if (options_.unk_id >= 0) {
      if (unk_begin >= 0 && options_.fuse_unk) {
        unk_len += n;
      } else {
        flush_unk();
        unk_begin = static_cast<int32_t>(i);
        unk_len = n;
      }
    }
    i += n;
  }
  flush_unk();

  // 2. Apply merges, lowest rank first; ties go to the leftmost pair.
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator<(const Candidate& o) const {  // priority_queue is a max-heap: invert
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || syms[pos].next < 0) return;
    auto it = merges_.find(pair_key(syms[pos].id, syms[syms[pos].next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i);
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    Symbol& left = syms[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = syms[left.next];
    // Skip entries made stale by an earlier merge of either symbol.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

void BpeModel::encode_scored(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = std::min(char_len(static_cast<uint8_t>(word[i])), word.size() - i);
    int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({-1, idx - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(n)});
    if (idx > 0) syms[idx - 1].next = idx;
    i += n;
  }

  // Highest score first; ties go to the leftmost pair.
  struct Candidate {
    float score;
    int32_t left, right;
    uint32_t size;
    bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = syms[l].len + syms[r].len;
    int32_t id = find(word.substr(syms[l].begin, size));
    if (id < 0 || static_cast<size_t>(id) >= scores_.size()) return;
    if (!mergeable_.empty() && !mergeable_[id]) return;
    heap.push({scores_[id], l, r, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i, i + 1);
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    Symbol& left = syms[top.left];
    Symbol& right = syms[top.right];
    if (left.len == 0 || right.len == 0 || left.next != top.right || left.len + right.len != top.size) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = top.left;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    std::string_view text = word.substr(syms[i].begin, syms[i].len);
    int32_t id = find(text);
    if (id >= 0) {
      out.push_back(id);
    } else {
      push_bytes(text, out);  // characters missing from the vocabulary fall back to bytes
    }
  }
}

}  // namespace corvid::tok
