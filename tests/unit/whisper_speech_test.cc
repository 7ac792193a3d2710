// Real speech through real Whisper weights, against faster-whisper 1.2.1 (CTranslate2,
// float32 on the CPU) on tests/data/speech (espeak-ng clips with known texts; README
// there). Needs scripts/fetch-model.sh --model whisper-tiny.en (./test.sh fetches it):
// every run decodes the clips with tiny.en greedily with timestamps; the other settings,
// Whisper base and the 211-s long-form file run with CORVID_REAL_WEIGHTS=1.
//
// What is asserted, and why it is not "every token equal everywhere":
// - greedy decoding of the lossless files (WAV, FLAC) gives faster-whisper's tokens
//   exactly: same features, same rules, fp32 both, and a greedy argmax is robust to
//   the last-bit differences of two GEMM libraries;
// - the lossy files (Vorbis, Opus) are decoded by other libraries (corvid: libvorbis
//   and libopus, resampled with libsamplerate; faster-whisper: PyAV / FFmpeg with its
//   own resampler), so their samples differ slightly and so may a token: they count
//   towards the word error rate only (c13, Opus at 20 dB SNR, is a near tie: "the car
//   moved carefully" or "the car will care for it" by the resampler alone; faster-whisper
//   fed libsamplerate's 16 kHz samples says the latter too, without timestamps);
// - beam search and the long-form loop carry more state, where near-ties can fall the
//   other way: their word error rate must be within a bound of faster-whisper's on the
//   same set, and most clips must agree exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "corvid/audio/audio_file.h"
#include "corvid/core/error.h"
#include "corvid/formats/json_file.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/speech_service.h"
#include "corvid/speech/transcriber.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path speech_dir() { return fixtures::source_dir() / "tests" / "data" / "speech"; }

// reference.json's normaliser: lowercase; every char not in [a-z0-9' ] becomes a space.
std::vector<std::string> normalised_words(const std::string& text) {
  std::string s;
  for (char c : text) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s += (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '\'' ? l : ' ';
  }
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Word-level edit distance (substitutions, insertions, deletions).
int64_t word_errors(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  std::vector<int64_t> prev(hyp.size() + 1), cur(hyp.size() + 1);
  for (size_t j = 0; j <= hyp.size(); ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= ref.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= hyp.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[hyp.size()];
}

TEST(WhisperWer, CountsEditsOfNormalisedWords) {
  EXPECT_EQ(normalised_words("The boat's  sail, RED!"), (std::vector<std::string>{"the", "boat's", "sail", "red"}));
  EXPECT_EQ(word_errors(normalised_words("a b c d"), normalised_words("a x c")), 2);  // one substitution, one deletion
  EXPECT_EQ(word_errors(normalised_words("a b"), normalised_words("a b c")), 1);
  EXPECT_EQ(word_errors({}, normalised_words("a b")), 2);
}

bool lossless(const std::string& file) { return file.ends_with(".wav") || file.ends_with(".flac"); }

bool real_weights_opted_in() {
  const char* on = std::getenv("CORVID_REAL_WEIGHTS");
  return on && std::string(on) == "1";
}

struct Setting {
  const char* name;  // reference.json's
  int beam_size;
  bool without_timestamps;
};
const Setting kSettings[] = {{"greedy_timestamps", 1, false}, {"greedy_notimestamps", 1, true}, {"beam5", 5, true}};

constexpr int kStreams = 4;  // the concurrent test's SpeechService streams

// (model, setting); the long-form test ignores the setting and runs on the first only.
using Case = std::tuple<const char*, Setting>;

class WhisperRealSpeech : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    model_name_ = std::get<0>(GetParam());
    setting_ = std::get<1>(GetParam());
    const bool always = model_name_ == "whisper-tiny.en" && std::string(setting_.name) == kSettings[0].name;
    if (!always && !real_weights_opted_in())
      GTEST_SKIP() << "CORVID_REAL_WEIGHTS=1 runs " << model_name_ << " " << setting_.name;
    const fs::path dir = fixtures::source_dir() / "models" / model_name_;
    if (!fs::exists(dir / "model.bin")) GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model " << model_name_;
    model_ = SpeechModel::load(dir.string(), Device::CPU, WhisperCapacity{kStreams, 5, 1, {}});
    reference_ = read_json_file((speech_dir() / "reference.json").string());
    texts_ = read_json_file((speech_dir() / "sentences.json").string())["text"];
  }

  static audio::Audio clip(const std::string& file) {
    return audio::resample(audio::read_file((speech_dir() / file).string()), audio::kWhisperSampleRate);
  }

  // faster-whisper's settings in reference.json: English, temperature 0 alone.
  static TranscribeOptions options(int beam_size, bool without_timestamps, bool condition_on_previous_text) {
    TranscribeOptions o;
    o.language = "en";
    o.beam_size = beam_size;
    o.temperatures = {0.0f};
    o.without_timestamps = without_timestamps;
    o.condition_on_previous_text = condition_on_previous_text;
    return o;
  }

  std::string model_name_;
  Setting setting_{};
  std::unique_ptr<SpeechModel> model_;
  Json reference_, texts_;
};

// Per clip: tokens against faster-whisper's (exactly, for greedy on lossless files), and
// the corpus word error rate against faster-whisper's on the same clips.
TEST_P(WhisperRealSpeech, ClipsDecodeAsFasterWhisper) {
  const Json& results = reference_["results"][model_name_];
  const Setting& s = setting_;
  Transcriber transcriber(*model_);
  int64_t errors = 0, ref_words = 0, fw_errors = 0, agree = 0, clips = 0;
  for (const auto& [file, by_setting] : results.items()) {
    const Json& want = by_setting[s.name];
    const Transcript got = transcriber.transcribe(clip(file), options(s.beam_size, s.without_timestamps, false));
    std::vector<std::vector<int32_t>> want_tokens, got_tokens;
    for (const Json& seg : want["segments"]) want_tokens.push_back(seg["tokens"].get<std::vector<int32_t>>());
    for (const TranscriptSegment& seg : got.segments) got_tokens.push_back(seg.tokens);
    const bool same = got_tokens == want_tokens;
    agree += same;
    ++clips;
    if (s.beam_size == 1 && lossless(file)) {
      EXPECT_TRUE(same) << model_name_ << " " << s.name << " " << file << ": '" << got.text() << "' vs faster-whisper '"
                        << want["text"].get<std::string>() << "'";
    }
    if (s.beam_size == 1 && same && lossless(file) && !got.segments.empty()) {  // same input and tokens: same scores
      EXPECT_NEAR(got.segments[0].avg_logprob, want["segments"][0]["avg_logprob"].get<double>(), 2e-3) << file;
      EXPECT_NEAR(got.segments[0].no_speech_prob, want["segments"][0]["no_speech_prob"].get<double>(), 2e-3) << file;
    }
    const std::vector<std::string> ref = normalised_words(texts_[file].get<std::string>());
    errors += word_errors(ref, normalised_words(got.text()));
    fw_errors += want["word_errors"].get<int64_t>();
    ref_words += static_cast<int64_t>(ref.size());
  }
  const double wer = static_cast<double>(errors) / static_cast<double>(ref_words);
  const double fw_wer = static_cast<double>(fw_errors) / static_cast<double>(ref_words);
  std::printf("%s %s: corpus WER %.3f (faster-whisper %.3f), %lld/%lld clips token-identical\n", model_name_.c_str(),
              s.name, wer, fw_wer, static_cast<long long>(agree), static_cast<long long>(clips));
  EXPECT_DOUBLE_EQ(fw_wer, reference_["aggregate"][model_name_][s.name]["corpus_wer"].get<double>());
  // One lossy clip falling the other way at a near tie costs up to 4 of the 141 words.
  EXPECT_LE(errors, fw_errors + 4) << s.name;
  EXPECT_GE(agree, clips - 2) << s.name;
}

// faster-whisper's long-form loop on 211 s of speech (greedy, timestamps, conditioned on
// the previous text): segments in order, inside the audio, covering it; WER near theirs.
TEST_P(WhisperRealSpeech, LongFormFollowsTheRecording) {
  if (!real_weights_opted_in()) GTEST_SKIP() << "CORVID_REAL_WEIGHTS=1 runs the 211-s file";
  if (std::string(setting_.name) != kSettings[0].name) GTEST_SKIP() << "one long-form setting (greedy, timestamps)";
  const Json& want = reference_["long"][model_name_];
  const audio::Audio audio = clip("long.opus");
  const Transcript got = Transcriber(*model_).transcribe(audio, options(1, false, true));
  ASSERT_FALSE(got.segments.empty());
  double last_end = 0;
  for (const TranscriptSegment& seg : got.segments) {
    EXPECT_GE(seg.start, last_end - 1e-6) << seg.text;
    EXPECT_GE(seg.end, seg.start) << seg.text;
    last_end = seg.end;
  }
  EXPECT_LE(last_end, audio.seconds() + 0.5);
  EXPECT_GE(last_end, audio.seconds() - 5.0);  // the last sentence ends ~0.6 s before the file does
  const std::vector<std::string> ref = normalised_words(texts_["long.opus"].get<std::string>());
  const double wer = static_cast<double>(word_errors(ref, normalised_words(got.text()))) / static_cast<double>(ref.size());
  const double fw_wer = want["wer"].get<double>();
  std::printf("%s long.opus: %zu segments, WER %.3f (faster-whisper %.3f, %zu segments)\n", model_name_.c_str(),
              got.segments.size(), wer, fw_wer, want["segments"].size());
  EXPECT_LE(wer, fw_wer + 0.02);
}

// Four streams at once through one batcher (SpeechService, as the server runs them):
// each clip gets the transcript, word timing included, that it gets alone. On the CPU
// a step's rows do not depend on what it batches with them, so this is exact.
TEST_P(WhisperRealSpeech, ConcurrentStreamsTranscribeAsOneByOne) {
  TranscribeOptions o = options(setting_.beam_size, setting_.without_timestamps, false);
  o.word_timestamps = true;
  std::vector<std::string> files;
  for (const auto& [file, unused] : reference_["results"][model_name_].items()) files.push_back(file);
  files.resize(std::min<size_t>(files.size(), 8));
  std::vector<Transcript> alone;
  {
    Transcriber transcriber(*model_);
    for (const std::string& f : files) alone.push_back(transcriber.transcribe(clip(f), o));
  }
  SpeechServiceConfig config;
  config.streams = kStreams;
  config.max_waiting = files.size();
  std::vector<std::promise<Transcript>> results(files.size());
  {
    SpeechService service(*model_, config);
    for (size_t i = 0; i < files.size(); ++i) {
      SpeechCallbacks cb;
      cb.done = [&results, i](Transcript t) { results[i].set_value(std::move(t)); };
      cb.failed = [&results, i](const std::string& e) { results[i].set_exception(std::make_exception_ptr(Error(e))); };
      service.submit(SpeechJob{clip(files[i]), o}, std::move(cb));
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const Transcript got = results[i].get_future().get();
    const Transcript& want = alone[i];
    ASSERT_EQ(got.segments.size(), want.segments.size()) << files[i];
    for (size_t s = 0; s < got.segments.size(); ++s) {
      const TranscriptSegment &g = got.segments[s], &w = want.segments[s];
      EXPECT_EQ(g.tokens, w.tokens) << files[i];
      EXPECT_EQ(g.start, w.start) << files[i];
      EXPECT_EQ(g.end, w.end) << files[i];
      EXPECT_EQ(g.avg_logprob, w.avg_logprob) << files[i];
      EXPECT_EQ(g.no_speech_prob, w.no_speech_prob) << files[i];
      ASSERT_EQ(g.words.size(), w.words.size()) << files[i];
      for (size_t k = 0; k < g.words.size(); ++k) {
        EXPECT_EQ(g.words[k].word, w.words[k].word) << files[i];
        EXPECT_EQ(g.words[k].start, w.words[k].start) << files[i];
        EXPECT_EQ(g.words[k].end, w.words[k].end) << files[i];
        EXPECT_EQ(g.words[k].probability, w.words[k].probability) << files[i];
      }
    }
    EXPECT_GT(got.segments.size(), 0u) << files[i];
  }
  EXPECT_EQ(model_->model->pool().self_blocks_used(), 0);
  EXPECT_EQ(model_->model->pool().cross_blocks_used(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, WhisperRealSpeech,
                         ::testing::Combine(::testing::Values("whisper-tiny.en", "whisper-base"),
                                            ::testing::ValuesIn(kSettings)),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string name = std::string(std::get<0>(p.param)) + "_" + std::get<1>(p.param).name;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace corvid
