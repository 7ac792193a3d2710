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

namespace corvid {

struct Tokenizer::Impl {
  std::string source;  // file path, for messages

  // Encode pipeline, in order.
  std::vector<tok::AddedToken> added;  // split out first (raw or normalized text)
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::BpeModel model;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor, when add_special_tokens

  tok::Decoder decoder;

  std::optional<int32_t> bos_id, pad_id;
  std::vector<int32_t> eos_ids;
  std::string bos_token, eos_token, chat_template;

  // Built by finalize(): the full id <-> text tables (model vocab + added
  // tokens), special flags, and the added-token matchers.
  void finalize();
  std::vector<std::string> id_to_token;
  std::unordered_map<std::string, int32_t, tok::StringHash, std::equal_to<>> token_to_id;
  std::vector<bool> special;
  std::vector<tok::AddedToken> raw_tokens, normalized_tokens;  // matched on raw / normalized text
  tok::AddedTokenMatcher raw_matcher, normalized_matcher;

  std::optional<int32_t> find(std::string_view token) const {
    auto it = token_to_id.find(token);
    if (it == token_to_id.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace corvid
