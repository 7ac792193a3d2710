// Word-level timestamps as faster-whisper computes them (CTranslate2's align() and
// faster-whisper's find_alignment / add_word_timestamps; openai-whisper's method):
// - decode the window's text afresh after sot_sequence + <|notimestamps|>, keeping the
//   cross-attention of the checkpoint's alignment heads over the window's real frames;
// - per head, normalise each frame's column over the tokens, median-filter each row
//   along time (width 7, reflected edges), average the heads;
// - dynamic time warping through the negated matrix (text rows × 20-ms positions);
//   a token starts where the path first enters its row;
// - tokens grouped into words (at spaces and punctuation; at code-point boundaries in
//   zh, ja, th, lo, my, yue), each word timed from its first token's start to the next
//   word's, its probability the mean of its tokens' (softmax over the text tokens);
// - leading punctuation joined to the next word, trailing to the previous;
// - the heuristics for words that swallow pauses: words at sentence ends and the first
//   words after silence are cut to twice the median word duration, and a segment's
//   start and end move to its first and last words unless those run 0.5 s past them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "corvid/models/whisper/whisper_model.h"
#include "corvid/speech/whisper_vocab.h"

namespace corvid {

class Tokenizer;

struct TimedWord {
  std::string word;  // as decoded, leading space included
  std::vector<int32_t> tokens;
  double start = 0, end = 0;  // seconds
  double probability = 0;
};

// One segment of a window, as the transcriber splits it: absolute times, its tokens
// (timestamps included) and, once timed, its words.
struct TimedSegment {
  double start = 0, end = 0;
  std::vector<int32_t> tokens;
  std::vector<TimedWord> words;
};

struct WordTimingOptions {
  std::string prepend_punctuations = "\"'\u201c\u00bf([{-";
  std::string append_punctuations = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
  int median_filter_width = 7;
};

namespace word_timing {

// The path of minimum total cost through -x ([rows, cols] row-major) from (0, 0) to
// (rows-1, cols-1) in steps of (1,1), (1,0), (0,1); ties go to (0,1), then (1,0). Pairs
// of (row, col), in order.
std::vector<std::pair<int64_t, int64_t>> negative_dtw(const std::vector<float>& x, int64_t rows, int64_t cols);
// Median of each window of `width` (odd) around every element of each row of x
// ([rows, cols]), edges reflected (without repeating the edge); rows no longer than
// width / 2 are left as they are.
void median_filter(std::vector<float>& x, int64_t rows, int64_t cols, int width);
// faster-whisper's split_to_word_tokens over `tokens` (text tokens, then <|endoftext|>).
std::vector<TimedWord> split_words(const Tokenizer& tokenizer, const WhisperVocab& vocab,
                                   const std::vector<int32_t>& tokens, const std::string& language);
// merge_punctuations: prepended punctuation moves onto the following word, appended
// onto the previous one; the words they leave are emptied, not removed.
void merge_punctuations(std::vector<TimedWord>& words, const std::string& prepended, const std::string& appended);

}  // namespace word_timing

class WordAligner {
 public:
  WordAligner(WhisperSteps& model, const WhisperVocab& vocab, const Tokenizer& tokenizer);

  // find_alignment: the words of `text_tokens` (no specials) in window `window` of
  // `audio`, timed in seconds from the window's start; `frames` log-mel frames of the
  // window are audio (the rest padding). Empty when there is nothing to align.
  std::vector<TimedWord> align(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                               const std::vector<int32_t>& sot_sequence, const std::vector<int32_t>& text_tokens,
                               int64_t frames, const std::string& language, const WordTimingOptions& options);

  // add_word_timestamps for one window's segments (window start `time_offset` seconds):
  // fills each segment's words and adjusts its start and end. `last_speech` is where
  // speech last ended (seconds); returns its new value.
  double time_segments(std::vector<TimedSegment>& segments, std::shared_ptr<const EncodedAudio> audio,
                       int64_t window, const std::vector<int32_t>& sot_sequence, int64_t frames, double time_offset,
                       const std::string& language, const WordTimingOptions& options, double last_speech);

 private:
  WhisperSteps& model_;
  const WhisperVocab& vocab_;
  const Tokenizer& tokenizer_;
  std::vector<std::pair<int, int>> heads_;  // the checkpoint's, or openai-whisper's default
};

}  // namespace corvid
