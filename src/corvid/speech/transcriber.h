// Transcriber: a recording to timed text segments, as faster-whisper's transcribe()
// does it (the reference this is checked against, token for token where both decode
// greedily):
// - log-mel of the whole recording (one clamp), cut into 30-s windows from a seek
//   point, each padded with zeros in feature space to 3000 frames;
// - the language detected on the first window (multilingual models) unless given;
// - per window, the prompt (previous text after <|startofprev|> when conditioning on
//   it), then decoding with temperature fallback: at 0 (greedy or beam search), and
//   again at each higher temperature (sampling, best of N) while the text compresses
//   too well (repetition) or its average log-probability is too low, unless the
//   window is silence (no-speech probability above its threshold);
// - windows judged silent are skipped; the decoded tokens split into segments at
//   consecutive timestamps, and the next window starts at the last timestamp (or after
//   the window when it ended on a lone one);
// - with word timestamps, each window's words are timed (word_timing.h), the segments'
//   bounds follow their words, and the next window starts where the last word ended
//   (unless the window ended on a lone timestamp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "corvid/audio/audio_file.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/window_decoder.h"
#include "corvid/speech/word_timing.h"

namespace corvid {

struct TranscribeOptions {
  std::string language;             // "": detected (multilingual models) or "en"
  std::string task = "transcribe";  // or "translate" (to English; multilingual models)
  int beam_size = 5;                // 1: greedy
  int best_of = 5;                  // samples per fallback temperature
  float patience = 1.0f;
  float length_penalty = 1.0f;
  std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  std::optional<float> compression_ratio_threshold = 2.4f;
  std::optional<float> log_prob_threshold = -1.0f;
  std::optional<float> no_speech_threshold = 0.6f;
  bool condition_on_previous_text = true;
  float prompt_reset_on_temperature = 0.5f;
  std::string initial_prompt;  // text that "came before", steering spelling and style
  bool without_timestamps = false;
  float max_initial_timestamp = 1.0f;
  bool suppress_blank = true;
  int max_new_tokens = 0;  // per window; 0: as many as fit
  uint64_t seed = 0;       // sampling at fallback temperatures
  bool word_timestamps = false;
  WordTimingOptions word_timing;
};

struct TranscriptSegment {
  int id = 0;
  int64_t seek = 0;  // the window's first frame (10 ms each)
  double start = 0, end = 0;
  std::string text;
  std::vector<int32_t> tokens;
  float temperature = 0;
  double avg_logprob = 0;
  double compression_ratio = 0;
  float no_speech_prob = 0;
  std::vector<TimedWord> words;  // with word_timestamps
};

struct Transcript {
  std::string language;
  float language_probability = 1.0f;
  double duration = 0;  // seconds of audio
  std::vector<TranscriptSegment> segments;
  std::string text() const;  // the segments' text joined, trimmed
};

// zlib's ratio of the text's bytes to their deflated size (faster-whisper's repetition measure).
double compression_ratio(const std::string& text);

class Transcriber {
 public:
  // Runs the model's steps itself (one transcription at a time on its device)...
  explicit Transcriber(SpeechModel& model);
  // ...or through `steps` (a WhisperBatcher over model.model), which outlives it.
  Transcriber(SpeechModel& model, WhisperSteps& steps);

  using SegmentCallback = std::function<void(const TranscriptSegment&)>;
  using ProgressCallback = std::function<void(double done_seconds, double total_seconds)>;
  // `audio` at 16 kHz (audio::resample). Segments go to `on_segment` as they are final.
  // Throws corvid::Error for options the model cannot honour (an unknown language,
  // translate on an English-only model).
  Transcript transcribe(const audio::Audio& audio, const TranscribeOptions& options,
                        const SegmentCallback& on_segment = {}, const ProgressCallback& progress = {});

 private:
  struct Attempt {
    WindowResult result;
    float temperature = 0;
    double compression_ratio = 0;
  };
  Attempt decode_with_fallback(std::shared_ptr<const EncodedAudio> audio, const std::vector<int32_t>& prompt,
                               const TranscribeOptions& o);
  std::string text_of(const std::vector<int32_t>& tokens) const;

  SpeechModel& model_;
  WhisperSteps& steps_;
  WindowDecoder decoder_;
  WordAligner aligner_;
};

}  // namespace corvid
