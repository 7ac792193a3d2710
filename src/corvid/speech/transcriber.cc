#include "corvid/speech/transcriber.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <zlib.h>

#include "corvid/audio/log_mel.h"
#include "corvid/core/ascii.h"
#include "corvid/core/error.h"

namespace corvid {

namespace {

constexpr double kFrameSeconds = 0.01;  // one log-mel frame (hop 160 at 16 kHz)
constexpr int64_t kInputStride = 2;     // frames per encoder position (and per timestamp step)


const Tokenizer& tokenizer_of(const SpeechModel& model) {
  CORVID_CHECK(model.tokenizer, "whisper: transcribing needs the model's tokenizer");
  return *model.tokenizer;
}

// faster-whisper's get_end: where the last word ends, else the last segment.
std::optional<double> end_of(const std::vector<TimedSegment>& segments) {
  for (auto s = segments.rbegin(); s != segments.rend(); ++s)
    if (!s->words.empty()) return s->words.back().end;
  if (segments.empty()) return std::nullopt;
  return segments.back().end;
}

}  // namespace

std::string Transcript::text() const {
  std::string all;
  for (const TranscriptSegment& s : segments) all += s.text;
  return ascii_trim(all);
}

double compression_ratio(const std::string& text) {
  if (text.empty()) return 0.0;
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  std::vector<Bytef> out(size);
  const int rc = compress2(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
                           static_cast<uLong>(text.size()), Z_DEFAULT_COMPRESSION);
  CORVID_CHECK(rc == Z_OK, "zlib: compress failed (", rc, ")");
  return static_cast<double>(text.size()) / static_cast<double>(size);
}

Transcriber::Transcriber(SpeechModel& model) : Transcriber(model, *model.model) {}

Transcriber::Transcriber(SpeechModel& model, WhisperSteps& steps)
    : model_(model),
      steps_(steps),
      decoder_(steps, model.vocab),
      aligner_(steps, model.vocab, tokenizer_of(model)) {}

std::string Transcriber::text_of(const std::vector<int32_t>& tokens) const {
  std::vector<int32_t> text;
  for (int32_t t : tokens)
    if (t < model_.vocab.eot) text.push_back(t);
  return model_.tokenizer->decode(text, /*skip_special_tokens=*/false);
}

Transcriber::Attempt Transcriber::decode_with_fallback(std::shared_ptr<const EncodedAudio> audio,
                                                       const std::vector<int32_t>& prompt,
                                                       const TranscribeOptions& o) {
  std::vector<Attempt> all, below_ratio;
  for (size_t i = 0; i < o.temperatures.size(); ++i) {
    const float t = o.temperatures[i];
    WindowRequest r;
    r.prompt = prompt;
    r.beam_size = t > 0 ? 1 : o.beam_size;
    r.best_of = o.best_of;
    r.patience = o.patience;
    r.length_penalty = o.length_penalty;
    r.temperature = t;
    r.max_initial_timestamp = o.max_initial_timestamp;
    r.suppress_blank = o.suppress_blank;
    r.max_new_tokens = o.max_new_tokens;
    r.seed = o.seed + i;
    Attempt a;
    a.result = decoder_.decode(audio, 0, r);
    a.temperature = t;
    a.compression_ratio = compression_ratio(ascii_trim(text_of(a.result.tokens)));
    all.push_back(a);
    bool fallback = false;
    if (o.compression_ratio_threshold) {
      if (a.compression_ratio > *o.compression_ratio_threshold)
        fallback = true;  // too repetitive
      else
        below_ratio.push_back(a);
    }
    if (o.log_prob_threshold && a.result.avg_logprob < *o.log_prob_threshold) fallback = true;
    // Silence: no fallback will find words.
    if (o.no_speech_threshold && a.result.no_speech_prob > *o.no_speech_threshold && o.log_prob_threshold &&
        a.result.avg_logprob < *o.log_prob_threshold)
      fallback = false;
    if (!fallback) return a;
  }
  // Every temperature failed: the best average log-probability, preferring text that
  // is not repetitive, reported at the last temperature (which decides the prompt reset).
  const std::vector<Attempt>& pool = below_ratio.empty() ? all : below_ratio;
  Attempt best = *std::max_element(pool.begin(), pool.end(), [](const Attempt& a, const Attempt& b) {
    return a.result.avg_logprob < b.result.avg_logprob;
  });
  best.temperature = o.temperatures.back();
  return best;
}

Transcript Transcriber::transcribe(const audio::Audio& audio, const TranscribeOptions& o,
                                   const SegmentCallback& on_segment, const ProgressCallback& progress) {
  const WhisperVocab& v = model_.vocab;
  const WhisperConfig& c = model_.config;
  CORVID_CHECK(audio.sample_rate == audio::kWhisperSampleRate, "whisper: audio must be at 16 kHz, not ",
               audio.sample_rate, " Hz");
  CORVID_CHECK(!o.temperatures.empty(), "whisper: no temperature to decode at");
  for (float t : o.temperatures) CORVID_CHECK(t >= 0 && t <= 2, "whisper: temperature ", t, " is outside [0, 2]");
  CORVID_CHECK(o.task == "transcribe" || o.task == "translate", "whisper: task must be transcribe or translate, not ",
               o.task);
  CORVID_CHECK(o.beam_size >= 1 && o.beam_size <= 16, "whisper: beam_size must be 1 to 16");
  CORVID_CHECK(o.best_of >= 1 && o.best_of <= 16, "whisper: best_of must be 1 to 16");
  Transcript out;
  out.duration = audio.seconds();
  if (!v.multilingual) {
    CORVID_CHECK(o.language.empty() || o.language == "en", "whisper: ", model_.path,
                 " is an English-only model; it cannot transcribe language '", o.language, "'");
    CORVID_CHECK(o.task == "transcribe", "whisper: ", model_.path, " is an English-only model; it cannot translate");
    out.language = "en";
  } else if (!o.language.empty()) {
    CORVID_CHECK(v.language_token(o.language), "whisper: unknown language '", o.language, "'");
    out.language = o.language;
  }

  int64_t frames = 0;
  const std::vector<float> features = steps_.spectrogram(audio.samples, audio::LogMel::kHop, &frames);
  const int64_t content = std::max<int64_t>(frames - 1, 0), window = c.input_frames();
  // The window of `window` frames from `seek`, zeros (in feature space) past the end.
  std::vector<float> slice(static_cast<size_t>(c.n_mels * window));
  auto encode_at = [&](int64_t seek) {
    std::fill(slice.begin(), slice.end(), 0.0f);
    const int64_t n = std::min(window, content - seek);
    for (int64_t m = 0; m < c.n_mels; ++m)
      std::copy_n(features.begin() + static_cast<std::ptrdiff_t>(m * frames + seek), n,
                  slice.begin() + static_cast<std::ptrdiff_t>(m * window));
    return steps_.encode(slice, 1);
  };

  std::shared_ptr<const EncodedAudio> first;
  if (out.language.empty()) {
    first = encode_at(0);
    const auto langs = decoder_.detect_language(first, 0);
    out.language = langs.front().first;
    out.language_probability = langs.front().second;
  }
  std::vector<int32_t> start = {v.sot};
  if (v.multilingual) {
    start.push_back(*v.language_token(out.language));
    start.push_back(o.task == "translate" ? v.translate : v.transcribe);
  }

  std::vector<int32_t> all_tokens;
  size_t prompt_reset_since = 0;
  if (!ascii_trim(o.initial_prompt).empty())
    all_tokens = model_.tokenizer->encode(" " + ascii_trim(o.initial_prompt), /*add_special_tokens=*/false);
  const size_t max_previous = static_cast<size_t>(c.text_positions / 2 - 1);
  int64_t seek = 0;
  int id = 0;
  double last_speech = 0;  // seconds: where the last timed word ended
  while (seek < content) {
    const double offset = seek * kFrameSeconds;
    const int64_t size = std::min(window, content - seek);
    // The language detection's window is used once and let go (the model's pools hold
    // a stream's windows one at a time).
    std::shared_ptr<const EncodedAudio> encoded = std::move(first);
    if (!encoded) encoded = encode_at(seek);
    std::vector<int32_t> prompt;
    if (all_tokens.size() > prompt_reset_since) {
      prompt.push_back(v.sot_prev);
      const size_t from = std::max(prompt_reset_since, all_tokens.size() - std::min(all_tokens.size(), max_previous));
      prompt.insert(prompt.end(), all_tokens.begin() + static_cast<std::ptrdiff_t>(from), all_tokens.end());
    }
    prompt.insert(prompt.end(), start.begin(), start.end());
    if (o.without_timestamps) prompt.push_back(v.no_timestamps);
    const Attempt a = decode_with_fallback(encoded, prompt, o);
    const WindowResult& r = a.result;
    const int64_t previous_seek = seek;
    bool skip = o.no_speech_threshold && r.no_speech_prob > *o.no_speech_threshold;
    if (o.log_prob_threshold && r.avg_logprob > *o.log_prob_threshold) skip = false;
    if (skip) {
      seek += size;
    } else {
      const std::vector<int32_t>& tokens = r.tokens;
      std::vector<TimedSegment> pieces;
      const size_t n = tokens.size();
      const bool single_ending = n >= 2 && !v.is_timestamp(tokens[n - 2]) && v.is_timestamp(tokens[n - 1]);
      std::vector<size_t> cuts;  // consecutive timestamps: a segment ends before the second
      for (size_t i = 1; i < n; ++i)
        if (v.is_timestamp(tokens[i]) && v.is_timestamp(tokens[i - 1])) cuts.push_back(i);
      if (!cuts.empty()) {
        if (single_ending) cuts.push_back(n);
        size_t last = 0;
        for (size_t cut : cuts) {
          std::vector<int32_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(last),
                                    tokens.begin() + static_cast<std::ptrdiff_t>(cut));
          pieces.push_back({offset + v.seconds(part.front()), offset + v.seconds(part.back()), part, {}});
          last = cut;
        }
        if (single_ending)
          seek += size;  // nothing was said after the last timestamp
        else
          seek += (tokens[last - 1] - v.timestamp_begin) * kInputStride;  // resume at the unfinished segment
      } else {
        double duration = size * kFrameSeconds;
        for (auto it = tokens.rbegin(); it != tokens.rend(); ++it)
          if (v.is_timestamp(*it)) {
            if (*it != v.timestamp_begin) duration = v.seconds(*it);
            break;
          }
        pieces.push_back({offset, offset + duration, tokens, {}});
        seek += size;
      }
      if (o.word_timestamps) {
        last_speech = aligner_.time_segments(pieces, encoded, 0, start, size, offset, out.language, o.word_timing,
                                             last_speech);
        const std::optional<double> last_word_end = end_of(pieces);
        if (!single_ending && last_word_end && *last_word_end > offset)
          seek = static_cast<int64_t>(std::nearbyint(*last_word_end * 100));
        if (last_word_end) last_speech = *last_word_end;
      }
      for (TimedSegment& p : pieces) {
        const std::string text = text_of(p.tokens);
        if (p.start == p.end || ascii_trim(text).empty()) continue;
        all_tokens.insert(all_tokens.end(), p.tokens.begin(), p.tokens.end());
        TranscriptSegment s;
        s.id = ++id;
        s.seek = previous_seek;
        s.start = p.start;
        s.end = p.end;
        s.text = text;
        s.tokens = std::move(p.tokens);
        s.temperature = a.temperature;
        s.avg_logprob = r.avg_logprob;
        s.compression_ratio = a.compression_ratio;
        s.no_speech_prob = r.no_speech_prob;
        s.words = std::move(p.words);
        if (on_segment) on_segment(s);
        out.segments.push_back(std::move(s));
      }
      if (!o.condition_on_previous_text || a.temperature > o.prompt_reset_on_temperature)
        prompt_reset_since = all_tokens.size();
    }
    if (progress) progress(std::min(content, seek) * kFrameSeconds, content * kFrameSeconds);
  }
  return out;
}

}  // namespace corvid
