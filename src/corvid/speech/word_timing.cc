#include "corvid/speech/word_timing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corvid/core/ascii.h"
#include "corvid/core/error.h"
#include "corvid/core/utf8.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

namespace {

constexpr double kTokensPerSecond = 50;  // encoder positions per second (20 ms each)
constexpr char32_t kReplacement = 0xFFFD;

// Python's `needle in haystack` on strings: a substring test (the empty string is in
// every string). faster-whisper's punctuation checks are written that way.
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Python's str.strip() on the ASCII whitespace a decoded token can hold.
std::string strip(const std::string& s) { return ascii_trim(s, " \t\r\n\f\v"); }

std::u32string code_points(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = kReplacement;
    const size_t len = utf8::decode(s, i, &cp);
    out.push_back(len ? cp : kReplacement);
    i += len ? len : 1;
  }
  return out;
}

// numpy's round(x, 2): half to even on x * 100.
double round2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

namespace word_timing {

std::vector<std::pair<int64_t, int64_t>> negative_dtw(const std::vector<float>& x, int64_t rows, int64_t cols) {
  CORVID_CHECK(rows >= 1 && cols >= 1 && static_cast<int64_t>(x.size()) == rows * cols,
               "word timing: a DTW over a ", rows, " x ", cols, " matrix of ", x.size(), " values");
  constexpr float inf = std::numeric_limits<float>::infinity();
  const int64_t w = cols + 1;
  std::vector<float> cost(static_cast<size_t>((rows + 1) * w), inf);
  std::vector<int8_t> trace(static_cast<size_t>((rows + 1) * w), -1);
  cost[0] = 0;
  for (int64_t j = 1; j <= cols; ++j)
    for (int64_t i = 1; i <= rows; ++i) {
      const float c0 = cost[static_cast<size_t>((i - 1) * w + j - 1)];
      const float c1 = cost[static_cast<size_t>((i - 1) * w + j)];
      const float c2 = cost[static_cast<size_t>(i * w + j - 1)];
      // The diagonal or the row step only when strictly cheaper than both others,
      // else the column step: the reference's rule, ties included.
      float c = c2;
      int8_t t = 2;
      if (c0 < c1 && c0 < c2) {
        c = c0;
        t = 0;
      } else if (c1 < c0 && c1 < c2) {
        c = c1;
        t = 1;
      }
      cost[static_cast<size_t>(i * w + j)] = c - x[static_cast<size_t>((i - 1) * cols + j - 1)];
      trace[static_cast<size_t>(i * w + j)] = t;
    }
  for (int64_t k = 0; k <= cols; ++k) trace[static_cast<size_t>(k)] = 2;
  for (int64_t k = 0; k <= rows; ++k) trace[static_cast<size_t>(k * w)] = 1;
  std::vector<std::pair<int64_t, int64_t>> path;
  int64_t i = rows, j = cols;
  while (i > 0 || j > 0) {
    path.emplace_back(i - 1, j - 1);
    const int8_t t = trace[static_cast<size_t>(i * w + j)];
    if (t == 0) {
      --i;
      --j;
    } else if (t == 1) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void median_filter(std::vector<float>& x, int64_t rows, int64_t cols, int width) {
  CORVID_CHECK(width >= 1 && width % 2 == 1, "word timing: the median filter's width must be odd, not ", width);
  const int64_t half = width / 2;
  if (cols <= half) return;
  std::vector<float> row(static_cast<size_t>(cols)), window(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    float* in = x.data() + r * cols;
    std::copy_n(in, cols, row.begin());
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t k = -half; k <= half; ++k) {
        int64_t at = std::abs(j + k);
        if (at >= cols) at = cols - (at - cols) - 2;
        window[static_cast<size_t>(k + half)] = row[static_cast<size_t>(at)];
      }
      std::nth_element(window.begin(), window.begin() + half, window.end());
      in[j] = window[static_cast<size_t>(half)];
    }
  }
}

std::vector<TimedWord> split_words(const Tokenizer& tokenizer, const WhisperVocab& vocab,
                                   const std::vector<int32_t>& tokens, const std::string& language) {
  // Subwords: cut wherever the tokens so far decode to whole code points (a U+FFFD in
  // the partial text that the whole text does not have means a character is cut).
  auto decode = [&](std::span<const int32_t> ids) { return tokenizer.decode(ids, /*skip_special_tokens=*/false); };
  const std::u32string full = code_points(decode(tokens));
  std::vector<TimedWord> subwords;
  std::vector<int32_t> current;
  size_t offset = 0;
  for (int32_t t : tokens) {
    current.push_back(t);
    const std::string text = decode(current);
    const std::u32string cps = code_points(text);
    const size_t bad = cps.find(kReplacement);
    if (bad == std::u32string::npos || (bad + offset < full.size() && full[bad + offset] == kReplacement)) {
      subwords.push_back({text, current});
      current.clear();
      offset += cps.size();
    }
  }
  static const std::vector<std::string> kNoSpaces = {"zh", "ja", "th", "lo", "my", "yue"};
  if (std::find(kNoSpaces.begin(), kNoSpaces.end(), language) != kNoSpaces.end()) return subwords;
  // Words: a subword that is special, starts with a space or is punctuation starts a
  // new word; any other joins the previous one.
  static const std::string kPunctuation = R"(!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)";
  std::vector<TimedWord> words;
  for (TimedWord& s : subwords) {
    const bool special = s.tokens.front() >= vocab.eot;
    const bool space = !s.word.empty() && s.word.front() == ' ';
    if (special || space || contains(kPunctuation, strip(s.word)) || words.empty()) {
      words.push_back(std::move(s));
    } else {
      words.back().word += s.word;
      words.back().tokens.insert(words.back().tokens.end(), s.tokens.begin(), s.tokens.end());
    }
  }
  return words;
}

void merge_punctuations(std::vector<TimedWord>& words, const std::string& prepended, const std::string& appended) {
  if (words.size() < 2) return;
  for (size_t i = words.size() - 1, j = words.size() - 1; i-- > 0;) {
    TimedWord& previous = words[i];
    TimedWord& following = words[j];
    if (!previous.word.empty() && previous.word.front() == ' ' && contains(prepended, strip(previous.word))) {
      following.word = previous.word + following.word;
      following.tokens.insert(following.tokens.begin(), previous.tokens.begin(), previous.tokens.end());
      previous.word.clear();
      previous.tokens.clear();
    } else {
      j = i;
    }
  }
  for (size_t i = 0, j = 1; j < words.size(); ++j) {
    TimedWord& previous = words[i];
    TimedWord& following = words[j];
    if ((previous.word.empty() || previous.word.back() != ' ') && contains(appended, following.word)) {
      previous.word += following.word;
      previous.tokens.insert(previous.tokens.end(), following.tokens.begin(), following.tokens.end());
      following.word.clear();
      following.tokens.clear();
    } else {
      i = j;
    }
  }
}

}  // namespace word_timing

WordAligner::WordAligner(WhisperSteps& model, const WhisperVocab& vocab, const Tokenizer& tokenizer)
    : model_(model), vocab_(vocab), tokenizer_(tokenizer), heads_(vocab.alignment_heads) {
  if (heads_.empty()) {
    // No list in the checkpoint: openai-whisper's default, every head of the second
    // half of the decoder's layers.
    const WhisperConfig& c = model.config();
    for (int layer = static_cast<int>(c.decoder_layers / 2); layer < c.decoder_layers; ++layer)
      for (int head = 0; head < c.decoder_heads; ++head) heads_.emplace_back(layer, head);
  }
}

std::vector<TimedWord> WordAligner::align(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                          const std::vector<int32_t>& sot_sequence,
                                          const std::vector<int32_t>& text_tokens, int64_t frames,
                                          const std::string& language, const WordTimingOptions& options) {
  const int64_t positions = std::min<int64_t>(frames / 2, model_.config().audio_positions);  // conv2's stride
  if (text_tokens.empty() || positions == 0) return {};
  std::vector<int32_t> input = sot_sequence;
  input.push_back(vocab_.no_timestamps);
  input.insert(input.end(), text_tokens.begin(), text_tokens.end());
  input.push_back(vocab_.eot);
  const int64_t n = static_cast<int64_t>(input.size()), text = static_cast<int64_t>(text_tokens.size());
  const int64_t sot = static_cast<int64_t>(sot_sequence.size()), vocab = model_.config().vocab_size;
  CORVID_CHECK(n <= model_.config().text_positions, "word timing: ", n, " tokens exceed the decoder's ",
               model_.config().text_positions, " positions");
  std::vector<float> logits;
  std::vector<float> weights = model_.cross_attention(audio, window, input, heads_, positions, logits);

  // Each head's columns normalised over the tokens (mean 0, variance 1).
  const int64_t H = static_cast<int64_t>(heads_.size());
  for (int64_t h = 0; h < H; ++h) {
    float* m = weights.data() + h * n * positions;
    for (int64_t f = 0; f < positions; ++f) {
      double sum = 0, sq = 0;
      for (int64_t t = 0; t < n; ++t) sum += m[t * positions + f];
      const double mean = sum / static_cast<double>(n);
      for (int64_t t = 0; t < n; ++t) sq += (m[t * positions + f] - mean) * (m[t * positions + f] - mean);
      const double sd = std::sqrt(sq / static_cast<double>(n));
      for (int64_t t = 0; t < n; ++t)
        m[t * positions + f] = sd > 0 ? static_cast<float>((m[t * positions + f] - mean) / sd) : 0.0f;
    }
  }
  word_timing::median_filter(weights, H * n, positions, options.median_filter_width);
  // The heads' mean, over the rows that predict the text tokens and <|endoftext|>.
  std::vector<float> matrix(static_cast<size_t>((text + 1) * positions), 0.0f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r <= text; ++r)
      for (int64_t f = 0; f < positions; ++f)
        matrix[static_cast<size_t>(r * positions + f)] += weights[static_cast<size_t>((h * n + sot + r) * positions + f)];
  for (float& v : matrix) v /= static_cast<float>(H);
  const auto path = word_timing::negative_dtw(matrix, text + 1, positions);

  // Each text token's probability: the softmax over the text tokens (ids below
  // <|endoftext|>) of the row that predicts it.
  std::vector<double> probs(static_cast<size_t>(text));
  for (int64_t t = 0; t < text; ++t) {
    const float* row = logits.data() + (sot + t) * vocab;
    const float top = *std::max_element(row, row + vocab_.eot);
    double sum = 0;
    for (int32_t i = 0; i < vocab_.eot; ++i) sum += std::exp(static_cast<double>(row[i] - top));
    probs[static_cast<size_t>(t)] = std::exp(static_cast<double>(row[text_tokens[static_cast<size_t>(t)]] - top)) / sum;
  }

  std::vector<int32_t> with_end = text_tokens;
  with_end.push_back(vocab_.eot);
  std::vector<TimedWord> words = word_timing::split_words(tokenizer_, vocab_, with_end, language);
  if (words.size() <= 1) return {};
  // The time at which the path enters each row: a token's start.
  std::vector<double> jumps;
  for (size_t k = 0; k < path.size(); ++k)
    if (k == 0 || path[k].first != path[k - 1].first) jumps.push_back(static_cast<double>(path[k].second) / kTokensPerSecond);
  words.pop_back();  // <|endoftext|>: only the end of the last word
  size_t boundary = 0;
  for (TimedWord& w : words) {
    const size_t next = boundary + w.tokens.size();
    CORVID_CHECK(next < jumps.size(), "word timing: the alignment path misses token rows");
    w.start = jumps[boundary];
    w.end = jumps[next];
    double sum = 0;
    for (size_t t = boundary; t < next; ++t) sum += probs[t];
    w.probability = sum / static_cast<double>(w.tokens.size());
    boundary = next;
  }
  return words;
}

double WordAligner::time_segments(std::vector<TimedSegment>& segments, std::shared_ptr<const EncodedAudio> audio,
                                  int64_t window, const std::vector<int32_t>& sot_sequence, int64_t frames,
                                  double time_offset, const std::string& language, const WordTimingOptions& options,
                                  double last_speech) {
  if (segments.empty()) return last_speech;
  std::vector<std::vector<int32_t>> text_per_segment;
  std::vector<int32_t> text;
  for (const TimedSegment& s : segments) {
    text_per_segment.emplace_back();
    for (int32_t t : s.tokens)
      if (t < vocab_.eot) text_per_segment.back().push_back(t);
    text.insert(text.end(), text_per_segment.back().begin(), text_per_segment.back().end());
  }
  std::vector<TimedWord> alignment = align(audio, window, sot_sequence, text, frames, language, options);

  std::vector<double> durations;
  for (const TimedWord& w : alignment)
    if (w.end - w.start != 0) durations.push_back(w.end - w.start);
  const double median_duration = std::min(0.7, durations.empty() ? 0.0 : median(durations));
  const double max_duration = median_duration * 2;
  if (!durations.empty()) {
    // Words at sentence boundaries no longer than twice the median word duration.
    static const std::string kSentenceEnds = ".\u3002!\uff01?\uff1f";
    for (size_t i = 1; i < alignment.size(); ++i) {
      if (alignment[i].end - alignment[i].start <= max_duration) continue;
      if (contains(kSentenceEnds, alignment[i].word))
        alignment[i].end = alignment[i].start + max_duration;
      else if (contains(kSentenceEnds, alignment[i - 1].word))
        alignment[i].start = alignment[i].end - max_duration;
    }
  }
  word_timing::merge_punctuations(alignment, options.prepend_punctuations, options.append_punctuations);

  size_t word_index = 0;
  for (size_t si = 0; si < segments.size(); ++si) {
    TimedSegment& segment = segments[si];
    std::vector<TimedWord> words;
    size_t saved_tokens = 0;
    while (word_index < alignment.size() && saved_tokens < text_per_segment[si].size()) {
      const TimedWord& timing = alignment[word_index];
      if (!timing.word.empty()) {
        TimedWord w = timing;
        w.start = round2(time_offset + timing.start);
        w.end = round2(time_offset + timing.end);
        words.push_back(std::move(w));
      }
      saved_tokens += timing.tokens.size();
      ++word_index;
    }
    if (!words.empty()) {
      // The first word after a pause, and the second, no longer than twice the median.
      if (words[0].end - last_speech > median_duration * 4 &&
          (words[0].end - words[0].start > max_duration ||
           (words.size() > 1 && words[1].end - words[0].start > max_duration * 2))) {
        if (words.size() > 1 && words[1].end - words[1].start > max_duration) {
          const double boundary = std::max(words[1].end / 2, words[1].end - max_duration);
          words[0].end = words[1].start = boundary;
        }
        words[0].start = std::max(0.0, words[0].end - max_duration);
      }
      // The segment's own start or end where the first or last word runs far past it.
      if (segment.start < words[0].end && segment.start - 0.5 > words[0].start)
        words[0].start = std::max(0.0, std::min(words[0].end - median_duration, segment.start));
      else
        segment.start = words[0].start;
      if (segment.end > words.back().start && segment.end + 0.5 < words.back().end)
        words.back().end = std::max(words.back().start + median_duration, segment.end);
      else
        segment.end = words.back().end;
      last_speech = segment.end;
    }
    segment.words = std::move(words);
  }
  return last_speech;
}

}  // namespace corvid
