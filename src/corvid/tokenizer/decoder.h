// Decoders turn token strings back into text (HF tokenizers' "decoder").
//
// HF decodes a whole list of tokens at once; corvid decodes token by token
// so that streaming output and one-shot decode share one code path and are
// equal by construction. Each step keeps just enough state to reproduce the
// batch result: ByteFallback holds a run of <0xNN> tokens until it ends
// (HF turns an ill-formed run into one U+FFFD per byte), ByteLevel holds an
// unfinished UTF-8 sequence, Strip remembers how much of the start it has
// removed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/tokenizer/regex.h"
#include "corvid/tokenizer/unicode.h"

namespace corvid::tok {

struct DecoderStep {
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece };
  Kind kind = Kind::ByteLevel;
  std::shared_ptr<const Regex> pattern;  // Replace
  std::string content;                   // Replace: replacement; Strip: the char removed; Metaspace: replacement
  size_t strip_start = 0, strip_stop = 0;  // Strip
  bool prepend = true;                   // Metaspace: drop the space it prepended to the first token
  bool cleanup = true;                   // WordPiece: no space before . , ! ? and into n't 'm 's 've 're
};

class Decoder {
 public:
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  const std::vector<DecoderStep>& steps() const { return steps_; }

  // Incremental decoding of one token stream.
  class Stream {
   public:
    explicit Stream(const Decoder& decoder);
    // Appends the text that `token` completes.
    void push(std::string_view token, std::string& out);
    // Appends whatever is still held back; the stream is then finished.
    void finish(std::string& out);

   private:
    struct StepState {
      std::string bytes;     // ByteFallback: the pending byte run
      Utf8Repair utf8;       // ByteLevel
      size_t stripped = 0;   // Strip: leading chars removed so far
      bool start_done = false;
      std::string held;      // Strip: trailing chars that may still be stripped
      size_t seen = 0;       // tokens that reached this step
      bool fused = false;    // an earlier Fuse/ByteLevel made the input one token
    };
    void run(size_t step, std::string token, std::string& out);
    void flush(size_t step, std::string& out);
    const Decoder& decoder_;
    std::vector<StepState> state_;
    bool seen_any_ = false;  // without steps: whether a separator is due
  };

 private:
  std::vector<DecoderStep> steps_;
};

}  // namespace corvid::tok
