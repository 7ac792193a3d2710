// The pieces of word timing (speech/word_timing.h) on hand-made inputs: the DTW path
// and its tie rule, the reflected median filter, word splitting with Whisper's
// tokenizer and punctuation merging, each as openai-whisper / faster-whisper do it.
#include <gtest/gtest.h>

#include "corvid/core/error.h"
#include "corvid/speech/word_timing.h"
#include "corvid/tokenizer/tokenizer.h"
#include "fixture_util.h"

namespace corvid {
namespace {

using Path = std::vector<std::pair<int64_t, int64_t>>;

// Expected paths: openai-whisper's dtw_cpu (Python, the same rule) on the same matrices.
TEST(WordTiming, DtwFollowsTheLargestValues) {
  // Each row is loud in its own columns; where a row step and the column step tie, the
  // column step wins, so the path enters the next row one column early.
  const std::vector<float> x = {3, 1, 0, 0, 0,  //
                                0, 0, 2, 1, 0,  //
                                0, 0, 0, 1, 4};
  EXPECT_EQ(word_timing::negative_dtw(x, 3, 5), (Path{{0, 0}, {0, 1}, {1, 1}, {1, 2}, {1, 3}, {2, 3}, {2, 4}}));
  EXPECT_EQ(word_timing::negative_dtw({1, 1, 0, 0, 0, 0, 1, 1}, 2, 4), (Path{{0, 0}, {0, 1}, {1, 1}, {1, 2}, {1, 3}}));
}

TEST(WordTiming, DtwBreaksTiesTowardsTheColumnStep) {
  // All costs equal: at (2, 2) of the cost table every step ties and the column step
  // wins, then only the row step reaches the start: (0,0) (1,0) (1,1).
  EXPECT_EQ(word_timing::negative_dtw({0, 0, 0, 0}, 2, 2), (Path{{0, 0}, {1, 0}, {1, 1}}));
  // One row: the path walks along it.
  EXPECT_EQ(word_timing::negative_dtw({0.5f, 0.1f, 0.9f}, 1, 3), (Path{{0, 0}, {0, 1}, {0, 2}}));
}

TEST(WordTiming, MedianFilterReflectsAtTheEdges) {
  // Width 3: at the edges the window is (x1, x0, x1) and (x[n-2], x[n-1], x[n-2]).
  std::vector<float> x = {1, 5, 2, 8, 3,  //
                          0, 0, 9, 0, 0};
  word_timing::median_filter(x, 2, 5, 3);
  EXPECT_EQ(x, (std::vector<float>{5, 2, 5, 3, 8, 0, 0, 0, 0, 0}));
  // Rows too short for the window stay as they are.
  std::vector<float> short_rows = {3, 1};
  word_timing::median_filter(short_rows, 1, 2, 7);
  EXPECT_EQ(short_rows, (std::vector<float>{3, 1}));
  EXPECT_THROW(word_timing::median_filter(x, 2, 5, 4), Error);
}

TimedWord word(const std::string& text, std::vector<int32_t> tokens) { return {text, std::move(tokens), 0, 0, 0}; }

TEST(WordTiming, PunctuationJoinsItsNeighbours) {
  std::vector<TimedWord> w = {word(" (", {1}), word("Hi", {2}), word(")", {3}), word(" there", {4}), word(".", {5})};
  const WordTimingOptions o;
  word_timing::merge_punctuations(w, o.prepend_punctuations, o.append_punctuations);
  ASSERT_EQ(w.size(), 5u);  // emptied, not removed: their tokens still count per segment
  EXPECT_EQ(w[0].word, "");
  EXPECT_EQ(w[1].word, " (Hi)");
  EXPECT_EQ(w[1].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(w[2].word, "");
  EXPECT_TRUE(w[2].tokens.empty());
  EXPECT_EQ(w[3].word, " there.");
  EXPECT_EQ(w[3].tokens, (std::vector<int32_t>{4, 5}));
  // A word ending in a space takes nothing after it.
  std::vector<TimedWord> spaced = {word(" a ", {1}), word(",", {2})};
  word_timing::merge_punctuations(spaced, o.prepend_punctuations, o.append_punctuations);
  EXPECT_EQ(spaced[0].word, " a ");
  EXPECT_EQ(spaced[1].word, ",");
}

class WordSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = fixtures::source_dir() / "models" / "whisper-tiny.en";
    if (!std::filesystem::exists(dir / "tokenizer.json"))
      GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model whisper-tiny.en";
    tokenizer_ = Tokenizer::from_hf_files((dir / "tokenizer.json").string(), "");
    vocab_.eot = tokenizer_->token_to_id("<|endoftext|>").value();
  }
  std::vector<int32_t> ids(const std::string& text) const {
    std::vector<int32_t> out = tokenizer_->encode(text, /*add_special_tokens=*/false);
    out.push_back(vocab_.eot);
    return out;
  }
  std::vector<std::string> words(const std::string& text, const std::string& language = "en") const {
    std::vector<std::string> out;
    for (const TimedWord& w : word_timing::split_words(*tokenizer_, vocab_, ids(text), language)) out.push_back(w.word);
    return out;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  WhisperVocab vocab_;
};

TEST_F(WordSplit, SplitsAtSpacesAndPunctuation) {
  EXPECT_EQ(words(" Hello, wonderful world."),
            (std::vector<std::string>{" Hello", ",", " wonderful", " world", ".", "<|endoftext|>"}));
  // Subword pieces of one word stay together; every token is in exactly one word.
  const std::vector<int32_t> all = ids(" Antidisestablishmentarianism!");
  size_t tokens = 0;
  const auto split = word_timing::split_words(*tokenizer_, vocab_, all, "en");
  for (const TimedWord& w : split) tokens += w.tokens.size();
  EXPECT_EQ(tokens, all.size());
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0].word, " Antidisestablishmentarianism");
  EXPECT_EQ(split[1].word, "!");
}

TEST_F(WordSplit, CutsAtWholeCharactersWithoutSpaces) {
  // A character spread over byte tokens is never cut; in Japanese every whole
  // character run is its own word (no spaces to split at).
  const std::string text = " \u65e5\u672c\u8a9e";
  const auto split = word_timing::split_words(*tokenizer_, vocab_, ids(text), "ja");
  std::string joined;
  for (const TimedWord& w : split) {
    EXPECT_EQ(w.word.find("\xEF\xBF\xBD"), std::string::npos) << "a cut character in '" << w.word << "'";
    joined += w.word;
  }
  EXPECT_EQ(joined, text + "<|endoftext|>");
  EXPECT_GE(split.size(), 3u);
}

}  // namespace
}  // namespace corvid
