// Word timestamps through real Whisper weights, against faster-whisper 1.2.1's
// (tests/data/speech/words_reference.json, made by tests/oracle/make_word_reference.py):
// tiny.en greedy in every run (./test.sh fetches it), beam 5 and Whisper base with
// CORVID_REAL_WEIGHTS=1.
//
// Where both decode the same tokens from the same samples (the lossless clips), every
// word is faster-whisper's: its text, its start and end (the same alignment path, so
// equal to the reported 10 ms) and its probability within 2e-3 (two GEMM libraries).
// The lossy clips' samples differ a little (see whisper_speech_test.cc), and with them
// a token or an alignment step now and then: across all clips, at least 95% of
// faster-whisper's words are matched by text and within 20 ms (one encoder position).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "corvid/audio/audio_file.h"
#include "corvid/formats/json_file.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/transcriber.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path speech_dir() { return fixtures::source_dir() / "tests" / "data" / "speech"; }

using Case = std::tuple<const char*, const char*>;  // model, setting

class WhisperRealWords : public ::testing::TestWithParam<Case> {};

TEST_P(WhisperRealWords, WordsAreFasterWhispers) {
  const std::string model_name = std::get<0>(GetParam()), setting = std::get<1>(GetParam());
  const char* opt_in = std::getenv("CORVID_REAL_WEIGHTS");
  if (!(model_name == "whisper-tiny.en" && setting == "greedy") && !(opt_in && std::string(opt_in) == "1"))
    GTEST_SKIP() << "CORVID_REAL_WEIGHTS=1 runs " << model_name << " " << setting;
  const fs::path dir = fixtures::source_dir() / "models" / model_name;
  if (!fs::exists(dir / "model.bin")) GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model " << model_name;
  const Json reference = read_json_file((speech_dir() / "words_reference.json").string());
  ASSERT_TRUE(reference["results"].contains(model_name));
  const Json& clips = reference["results"][model_name][setting];
  std::unique_ptr<SpeechModel> model = SpeechModel::load(dir.string(), Device::CPU);
  Transcriber transcriber(*model);
  TranscribeOptions o;
  o.language = "en";
  o.beam_size = setting == "beam5" ? 5 : 1;
  o.temperatures = {0.0f};
  o.condition_on_previous_text = false;
  o.word_timestamps = true;

  int64_t want_words = 0, got_words = 0, matched = 0;
  for (const auto& [file, segments] : clips.items()) {
    const audio::Audio audio =
        audio::resample(audio::read_file((speech_dir() / file).string()), audio::kWhisperSampleRate);
    const Transcript got = transcriber.transcribe(audio, o);
    std::vector<TimedWord> mine;
    for (const TranscriptSegment& s : got.segments) mine.insert(mine.end(), s.words.begin(), s.words.end());
    bool same_tokens = got.segments.size() == segments.size();
    for (size_t i = 0; same_tokens && i < segments.size(); ++i)
      same_tokens = got.segments[i].tokens == segments[i]["tokens"].get<std::vector<int32_t>>();
    std::vector<Json> theirs;
    for (const Json& s : segments)
      for (const Json& w : s["words"]) theirs.push_back(w);
    want_words += static_cast<int64_t>(theirs.size());
    got_words += static_cast<int64_t>(mine.size());
    // Matched: in order, by text and times within one encoder position.
    for (size_t i = 0, j = 0; i < theirs.size() && j < mine.size();) {
      const std::string text = theirs[i][0].get<std::string>();
      const double start = theirs[i][1].get<double>(), end = theirs[i][2].get<double>();
      if (mine[j].word == text && std::fabs(mine[j].start - start) <= 0.0201 && std::fabs(mine[j].end - end) <= 0.0201) {
        ++matched, ++i, ++j;
      } else if (mine.size() - j > theirs.size() - i) {
        ++j;
      } else {
        ++i;
      }
    }
    const bool lossless = file.ends_with(".wav") || file.ends_with(".flac");
    if (!lossless || !same_tokens) continue;
    ASSERT_EQ(mine.size(), theirs.size()) << file;
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_EQ(mine[i].word, theirs[i][0].get<std::string>()) << file << " word " << i;
      EXPECT_NEAR(mine[i].start, theirs[i][1].get<double>(), 1e-6) << file << " '" << mine[i].word << "'";
      EXPECT_NEAR(mine[i].end, theirs[i][2].get<double>(), 1e-6) << file << " '" << mine[i].word << "'";
      EXPECT_NEAR(mine[i].probability, theirs[i][3].get<double>(), 2e-3) << file << " '" << mine[i].word << "'";
    }
    for (size_t i = 0; i < segments.size(); ++i) {
      EXPECT_NEAR(got.segments[i].start, segments[i]["start"].get<double>(), 1e-6) << file << " segment " << i;
      EXPECT_NEAR(got.segments[i].end, segments[i]["end"].get<double>(), 1e-6) << file << " segment " << i;
    }
  }
  std::printf("%s %s: %lld words (faster-whisper %lld), %lld matched within 20 ms\n", model_name.c_str(),
              setting.c_str(), static_cast<long long>(got_words), static_cast<long long>(want_words),
              static_cast<long long>(matched));
  EXPECT_GE(static_cast<double>(matched), 0.95 * static_cast<double>(want_words));
}

INSTANTIATE_TEST_SUITE_P(Models, WhisperRealWords,
                         ::testing::Combine(::testing::Values("whisper-tiny.en", "whisper-base"),
                                            ::testing::Values("greedy", "beam5")),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string name = std::string(std::get<0>(p.param)) + "_" + std::get<1>(p.param);
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace corvid
