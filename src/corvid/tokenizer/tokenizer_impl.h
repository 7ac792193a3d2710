// Internal state of a Tokenizer, filled in by the loaders (hf_loader.cc,
// gguf_loader.cc) and used by tokenizer.cc. Not part of the public API.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "corvid/tokenizer/added_tokens.h"
#include "corvid/tokenizer/bpe.h"
#include "corvid/tokenizer/decoder.h"
#include "corvid/tokenizer/normalizer.h"
#include "corvid/tokenizer/pre_tokenizer.h"
#include "corvid/tokenizer/tokenizer.h"
#include "corvid/tokenizer/wordpiece.h"

namespace corvid {

struct Tokenizer::Impl {
  std::string source;  // file path, for messages

  // Encode pipeline, in order.
  std::vector<tok::AddedToken> added;  // split out first (raw or normalized text)
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::BpeModel model;  // the vocabulary, and BPE's merges
  std::optional<tok::WordPieceOptions> wordpiece;  // set: words are split by WordPiece, not BPE
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const {
    if (wordpiece) return tok::wordpiece_encode(model, *wordpiece, word, ids);
    model.encode_word(word, ids);
  }
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor, when add_special_tokens

  tok::Decoder decoder;

  std::optional<int32_t> bos_id, pad_id;
  std::vector<int32_t> eos_ids;
  std::string bos_token, eos_token, chat_template;

  // Built by finalize(): id -> text over model vocab and added tokens (no
  // copy of the big model vocabulary: pointers into it), special flags, the
  // added tokens by text, and the added-token matchers.
  void finalize();
  std::vector<const std::string*> id_text;  // nullptr for ids without a token
  std::vector<bool> special;
  std::unordered_map<std::string, int32_t, tok::StringHash, std::equal_to<>> added_ids;
  std::vector<tok::AddedToken> raw_tokens, normalized_tokens;  // matched on raw / normalized text
  tok::AddedTokenMatcher raw_matcher, normalized_matcher;

  // Added tokens take precedence over a model token of the same text, as in HF.
  std::optional<int32_t> find(std::string_view token) const {
    if (auto it = added_ids.find(token); it != added_ids.end()) return it->second;
    int32_t id = model.find(token);
    if (id < 0) return std::nullopt;
    return id;
  }
  const std::string* text_of(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < id_text.size() ? id_text[id] : nullptr;
  }
};

}  // namespace corvid
