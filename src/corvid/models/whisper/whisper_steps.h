// WhisperSteps: the device work a transcription asks of a Whisper model, as the
// decoding code (speech/) sees it. WhisperModel runs each call itself, on the caller's
// thread; WhisperBatcher (speech/whisper_batcher.h) merges the calls of concurrent
// transcriptions into one encode or decoder step for all of them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "corvid/models/whisper/whisper_config.h"
#include "corvid/models/whisper/whisper_kv_pool.h"

namespace corvid {

struct EncodedAudio;
struct WhisperSequence;

class WhisperSteps {
 public:
  virtual ~WhisperSteps() = default;

  virtual const WhisperConfig& config() const = 0;
  // What the model's KV pools were sized for (per transcription: hypotheses, windows).
  virtual const WhisperCapacity& capacity() const = 0;

  // The log-mel features of a whole recording (audio::LogMel::spectrogram: the samples,
  // then `pad` zeros, every frame kept): [n_mels, *frames] row-major. On the model's
  // device where it has a front end there (cuFFT on CUDA), else on the CPU.
  virtual std::vector<float> spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames) = 0;
  // Encodes `windows` windows of features, each [n_mels, 3000] row-major (mel-major,
  // as LogMel gives them), back to back in `features`.
  virtual std::shared_ptr<EncodedAudio> encode(std::span<const float> features, int64_t windows,
                                               bool keep_states = false) = 0;
  // A new empty hypothesis over window `window` of `audio`; `to` becomes a copy of
  // `from`, sharing its blocks until either writes to them. Neither does device work.
  virtual std::unique_ptr<WhisperSequence> start(std::shared_ptr<const EncodedAudio> audio,
                                                 int64_t window) const = 0;
  virtual void copy(const WhisperSequence& from, WhisperSequence& to) const = 0;
  // One decoder step over many hypotheses: tokens[s] are appended to seqs[s] (each at
  // least one token, all within text_positions). `want` picks rows of the step
  // (indices into the tokens laid end to end) whose logits come back in `logits`
  // ([want.size(), vocab] row-major, host). A refused step changes nothing.
  virtual void decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                      std::span<const int64_t> want, std::vector<float>& logits) = 0;
  // Word timing's cross-attention: `tokens` decoded afresh over window `window` of
  // `audio`; for each (decoder layer, head) of `heads`, [tokens, frames] row-major, the
  // softmax of that head's scaled scores over the window's first `frames` audio
  // positions (past them is padding). `logits` gets every row's logits [tokens, vocab].
  virtual std::vector<float> cross_attention(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                             const std::vector<int32_t>& tokens,
                                             std::span<const std::pair<int, int>> heads, int64_t frames,
                                             std::vector<float>& logits) = 0;
};

}  // namespace corvid
