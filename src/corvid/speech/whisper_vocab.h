// WhisperVocab: the ids Whisper's decoding rules are written in (its special tokens,
// timestamps, languages) and the checkpoint's suppression lists and alignment heads.
// The special tokens are found by name in the tokenizer; the lists come from the
// checkpoint's own files: a CTranslate2 folder's config.json (suppress_ids,
// suppress_ids_begin, lang_ids, alignment_heads) or a Hugging Face folder's
// generation_config.json (suppress_tokens, begin_suppress_tokens, lang_to_id,
// alignment_heads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace corvid {

class Tokenizer;

struct WhisperVocab {
  int32_t eot = 0, sot = 0, sot_prev = 0, sot_lm = -1, no_speech = -1, no_timestamps = 0;
  int32_t transcribe = -1, translate = -1;
  int32_t timestamp_begin = 0;  // <|0.00|>: no_timestamps + 1
  int32_t timestamp_end = 0;    // the last timestamp: vocab_size - 1
  bool multilingual = false;    // a 99- or 100-language vocabulary (not an .en model)
  std::vector<std::pair<std::string, int32_t>> languages;  // ("en", <|en|>'s id), in id order
  std::vector<int32_t> suppress;        // suppressed at every step (the checkpoint's non-speech tokens)
  std::vector<int32_t> suppress_begin;  // suppressed at the first sampled token (" " and eot)
  std::vector<std::pair<int, int>> alignment_heads;  // (decoder layer, head) for word timing

  // The language's token; nullopt when the model has no such language.
  std::optional<int32_t> language_token(const std::string& code) const;
  std::string language_of(int32_t token) const;  // "" when `token` names no language
  bool is_timestamp(int32_t id) const { return id >= timestamp_begin; }
  // Seconds of a timestamp token (0.02-s steps).
  double seconds(int32_t id) const { return 0.02 * (id - timestamp_begin); }
};

// The tokens openai-whisper suppresses as non-speech (speaker tags, music symbols,
// brackets): each symbol, bare and after a space, that is one token, plus " -" and " '".
// What a checkpoint's list holds when it has one; used when it has none.
std::vector<int32_t> non_speech_tokens(const Tokenizer& tokenizer);

// `extras` is the checkpoint's config.json (CTranslate2) or generation_config.json
// (Hugging Face), or null when it has neither (then nothing is suppressed).
WhisperVocab whisper_vocab(const Tokenizer& tokenizer, int64_t vocab_size, const nlohmann::json& extras,
                           const std::string& source);

}  // namespace corvid
