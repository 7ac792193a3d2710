// Text <-> token ids for the models corvid runs.
//
// One implementation serves both sources: a Hugging Face tokenizer.json
// (byte-level BPE as in Qwen3, Llama 3, SmolLM2; SentencePiece-style BPE
// with byte fallback as in Gemma 3) and the vocabulary inside a GGUF file
// ("gpt2" byte-level BPE with a named pre-tokenizer, "llama" SentencePiece
// with scores). The oracle is Hugging Face `tokenizers`: encode and decode
// return exactly its ids and text (tests/tokenizer/ holds the fixtures).
//
// A Tokenizer is immutable after loading; encode/decode may be called from
// many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corvid {

class GgufFile;

class Tokenizer {
 public:
  // tokenizer_config_json_path may be empty (then no chat template, and
  // BOS/EOS come from the post-processor and special tokens only).
  static std::unique_ptr<Tokenizer> from_hf_files(const std::string& tokenizer_json_path,
                                                  const std::string& tokenizer_config_json_path);
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Added/special tokens written in `text` (e.g. "<|im_start|>") always become
  // their ids; add_special_tokens adds what the model expects around a
  // sequence (BOS for Llama 3 and Gemma 3, nothing for Qwen3). Invalid UTF-8
  // in `text` is replaced by U+FFFD first.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids outside the vocabulary are ignored. Broken UTF-8 (e.g. half a
  // character's bytes) becomes U+FFFD, as in HF.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t vocab_size() const;  // highest id + 1, added tokens included
  std::optional<int32_t> bos_id() const;
  std::vector<int32_t> eos_ids() const;
  bool is_special(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;  // token as stored in the vocabulary
  std::string id_to_token(int32_t id) const;                          // "" for an unknown id
  std::string chat_template() const;  // "" if none
  std::string bos_token() const;      // "" if none
  std::string eos_token() const;      // "" if none

  // How the vocabulary's token strings spell bytes, for a grammar engine that reads
  // them (structured output): GPT-2 byte-level ("Ġ" for a space), SentencePiece byte
  // fallback ("▁" for a space, "<0xNN>" tokens), or the text itself; and whether the
  // decoder drops a space it expects before the first word (Metaspace / Strip).
  struct VocabSpelling {
    enum class Kind { Raw, ByteLevel, ByteFallback };
    Kind kind = Kind::Raw;
    bool prefix_space = false;
  };
  VocabSpelling vocab_spelling() const;

  std::optional<int32_t> pad_id() const;
  // Whether encode(..., true) adds a BOS id in front.
  bool adds_bos() const;
  // The file this tokenizer was loaded from (for messages).
  const std::string& source() const;

  struct Impl;  // defined in tokenizer_impl.h, shared with the loaders

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  friend class StreamingDetokenizer;
  std::unique_ptr<Impl> impl_;
};

// Turns generated ids into text as they arrive. push() returns only complete
// UTF-8 characters; the concatenation of all push() results and flush() is
// exactly Tokenizer::decode(all ids, skip_special_tokens).
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);
  ~StreamingDetokenizer();
  StreamingDetokenizer(StreamingDetokenizer&&) noexcept;
  StreamingDetokenizer& operator=(StreamingDetokenizer&&) noexcept;

  std::string push(int32_t id);
  // Feeds context without returning its text: ids that precede the ones to
  // stream (e.g. the prompt, or just its last few ids). Decoding is then a
  // continuation, so a SentencePiece decoder does not strip the leading space
  // of the first generated word as it would at the start of a text.
  void prime(std::span<const int32_t> ids);
  // Emits what is still held back (e.g. a trailing incomplete byte sequence
  // as U+FFFD) and starts over for a new sequence.
  std::string flush();

 private:
  struct State;
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::unique_ptr<State> state_;
};

}  // namespace corvid
