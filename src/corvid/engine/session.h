// Session: one sequence being generated — its KV cache, the tokens in it, and
// the decode loop. Turns of a chat append to the same session, so only the new
// tokens are prefilled.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/engine/sampler.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/engine/runner.h"

namespace corvid {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these (EOS)
  int64_t prefill_chunk = 512;    // tokens per forward during prefill
};

struct GenerationStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  bool stopped_by_eos = false;
  double prefill_tok_s() const { return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0; }
  // The first generated token comes from the prefill's logits, so decode covers the rest.
  double decode_tok_s() const {
    return decode_seconds > 0 && generated_tokens > 1 ? static_cast<double>(generated_tokens - 1) / decode_seconds : 0;
  }
};

class Session {
 public:
  // kv_format: the KV cache's (kv/kv_format.h); layer_formats: per-layer formats
  // (kv/kv_config.h), one entry per model layer, or none; kv_quant_start: the delayed
  // switch (kv/kv_cache.h).
  Session(Runner& runner, int64_t context_size, const KvFormat& kv_format = DType::F32,
          std::span<const std::optional<KvFormat>> layer_formats = {}, int64_t kv_quant_start = 0);

  // Appends `new_tokens` to the sequence, then samples up to max_new_tokens, calling
  // on_token for each (return false to stop early). Throws corvid::Error, before any
  // work, when the prompt plus max_new_tokens cannot fit in the context.
  GenerationStats generate(std::span<const int32_t> new_tokens, const GenerateOptions& options,
                           const std::function<bool(int32_t)>& on_token);

  // Runs the tokens through the model and returns the logits of every position ([n, vocab]).
  const Tensor& score(std::span<const int32_t> new_tokens);

  // Adds tokens to the sequence without running them; the next call prefills them.
  void append(std::span<const int32_t> tokens) { tokens_.insert(tokens_.end(), tokens.begin(), tokens.end()); }

  // Makes the sequence `tokens` while keeping the cached keys/values of the longest
  // prefix it shares with the current sequence, and returns the tokens after that
  // prefix — to pass to generate(). A chat re-renders the whole conversation each turn
  // (templates may rewrite earlier turns, e.g. drop old reasoning); only what changed
  // is prefilled again.
  std::vector<int32_t> continue_from(std::span<const int32_t> tokens);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t context_size() const { return kv_.capacity(); }
  void reset() {
    tokens_.clear();
    cached_ = 0;
  }

 private:
  // Forwards tokens_[cached_:] in chunks; leaves the last position's logits in logits_.
  void prefill(int64_t chunk);

  Runner& runner_;
  KVCache kv_;
  std::vector<int32_t> tokens_;  // the sequence so far
  size_t cached_ = 0;            // how many of tokens_ have their keys and values in kv_
  OwnedTensor logits_;      // [1, vocab] (model on the CPU)
  DeviceTensor device_logits_;  // [1, vocab] (model on a GPU: sampled there, only the token id comes back)
  Tensor next_logits_;      // whichever of the two the forward writes
  OwnedTensor all_logits_;  // [n, vocab] for score()
  std::vector<int32_t> positions_;
};

}  // namespace corvid
