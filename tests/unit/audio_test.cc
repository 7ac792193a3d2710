// Audio in and Whisper's front end: decoding (wav, flac, ogg, mp3, raw PCM; bad and
// truncated files refused with a message), resampling, and the log-mel features against
// transformers' WhisperFeatureExtractor on real speech (espeak-ng; tests/data/audio).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "corvid/audio/audio_file.h"
#include "corvid/audio/log_mel.h"
#include "corvid/core/error.h"
#include "binary_file_util.h"
#include "fixture_util.h"

namespace corvid::audio {
namespace {

namespace fs = std::filesystem;

fs::path audio_dir() { return fixtures::source_dir() / "tests" / "data" / "audio"; }

using fixtures::bytes_of;
using fixtures::array_of;

TEST(Audio, DecodesEveryFormatToTheSameSpeech) {
  const Audio wav = read_file((audio_dir() / "speech_16k.wav").string());
  EXPECT_EQ(wav.sample_rate, 16000);
  EXPECT_GT(wav.seconds(), 1.0);
  for (const char* name : {"speech_16k.flac", "speech_16k.ogg", "speech_16k.mp3"}) {
    const Audio a = read_file((audio_dir() / name).string());
    EXPECT_EQ(a.sample_rate, 16000) << name;
    // Lossy codecs change samples and add a few of padding; the speech's energy stays.
    EXPECT_NEAR(a.seconds(), wav.seconds(), 0.1) << name;
    double e1 = 0, e2 = 0;
    for (float s : wav.samples) e1 += static_cast<double>(s) * s;
    for (float s : a.samples) e2 += static_cast<double>(s) * s;
    EXPECT_NEAR(e2 / e1, 1.0, 0.1) << name;
  }
  const Audio flac = read_file((audio_dir() / "speech_16k.flac").string());
  ASSERT_EQ(flac.samples.size(), wav.samples.size());  // lossless: the same samples
  for (size_t i = 0; i < wav.samples.size(); ++i) ASSERT_EQ(flac.samples[i], wav.samples[i]) << i;
}

TEST(Audio, StereoIsAveragedAndRawPcmDecodes) {
  // Two channels of s16le: left 0.5, right -0.25 → mono 0.125.
  std::vector<uint8_t> pcm;
  for (int i = 0; i < 100; ++i)
    for (int16_t v : {int16_t{16384}, int16_t{-8192}}) {
      pcm.push_back(static_cast<uint8_t>(v & 0xff));
      pcm.push_back(static_cast<uint8_t>((v >> 8) & 0xff));
    }
  const Audio a = decode_pcm(pcm, 8000, 2, PcmFormat::S16LE, "test");
  ASSERT_EQ(a.samples.size(), 100u);
  EXPECT_FLOAT_EQ(a.samples[7], 0.125f);
  EXPECT_THROW(decode_pcm(std::span<const uint8_t>(pcm.data(), 3), 8000, 2, PcmFormat::S16LE, "t"), Error);
  EXPECT_THROW(decode_pcm(pcm, 10, 1, PcmFormat::S16LE, "t"), Error);
}

TEST(Audio, ResamplesTo16kHz) {
  // A 440 Hz tone at 44.1 kHz keeps its frequency at 16 kHz: zero crossings per second.
  Audio tone;
  tone.sample_rate = 44100;
  for (int i = 0; i < 44100; ++i) tone.samples.push_back(static_cast<float>(0.5 * std::sin(2 * M_PI * 440 * i / 44100.0)));
  const Audio r = resample(tone, 16000);
  EXPECT_EQ(r.sample_rate, 16000);
  EXPECT_NEAR(static_cast<double>(r.samples.size()), 16000, 2);
  int crossings = 0;
  for (size_t i = 1000; i + 1 < r.samples.size() - 1000; ++i) crossings += (r.samples[i] < 0) != (r.samples[i + 1] < 0);
  EXPECT_NEAR(crossings, 880 * (r.samples.size() - 2001) / 16000.0, 4);
}

TEST(Audio, BadAndTruncatedFilesAreErrors) {
  auto message = [](std::span<const uint8_t> b) {
    try {
      decode(b, "upload.wav");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("decoded");
  };
  const std::vector<uint8_t> junk = {'n', 'o', 't', ' ', 'a', 'u', 'd', 'i', 'o'};
  EXPECT_EQ(message(junk).rfind("upload.wav: not an audio file", 0), 0u) << message(junk);
  EXPECT_NE(message({}).find("empty"), std::string::npos);
  // A WAV cut in its data keeps what it holds; cut in its header it is refused.
  const std::vector<uint8_t> wav = bytes_of(audio_dir() / "speech_16k.wav");
  const Audio cut = decode(std::span<const uint8_t>(wav.data(), wav.size() / 2), "half.wav");
  EXPECT_NEAR(static_cast<double>(cut.samples.size()), (wav.size() / 2 - 44) / 2.0, 1000);
  EXPECT_NE(message(std::span<const uint8_t>(wav.data(), 20)), "decoded");
  for (const char* name : {"speech_16k.flac", "speech_16k.ogg", "speech_16k.mp3"}) {
    const std::vector<uint8_t> b = bytes_of(audio_dir() / name);
    for (size_t n : {size_t{10}, b.size() / 3}) {
      try {
        decode(std::span<const uint8_t>(b.data(), n), name);  // what it holds, or an error: never a crash
      } catch (const Error&) {
      }
    }
  }
}

// transformers' WhisperFeatureExtractor on the same 16 kHz samples (oracle made by
// tests/oracle/make_audio_oracle.py): every value within 1e-5 of its float64 (numpy) path.
// Its float32 (torch) path, openai-whisper's arithmetic, is itself 3.5e-5 from the float64
// one on this speech: corvid is held to 5e-5 of it.
TEST(LogMel, EqualsWhisperFeatureExtractor) {
  const Audio wav = read_file((audio_dir() / "speech_16k.wav").string());
  const nlohmann::json oracle = fixtures::read_json(audio_dir() / "log_mel_oracle.json");
  for (const char* key : {"n80", "n128"}) {
    const nlohmann::json& want = oracle[key];
    const int n_mels = want["n_mels"].get<int>();
    const LogMel mel(n_mels);
    const std::vector<float> got = mel.features(wav.samples);
    ASSERT_EQ(got.size(), static_cast<size_t>(n_mels) * LogMel::kFrames);
    const int frames = want["frames"].get<int>();
    const std::vector<float> head = array_of<float>(audio_dir() / ("log_mel_n" + std::to_string(n_mels) + ".f32"));
    ASSERT_EQ(head.size(), static_cast<size_t>(n_mels * frames));  // [n_mels, frames]
    double worst = 0;
    for (int m = 0; m < n_mels; ++m)
      for (int t = 0; t < frames; ++t)
        worst = std::max(worst, std::abs(static_cast<double>(got[static_cast<size_t>(m) * LogMel::kFrames + t]) -
                                         head[static_cast<size_t>(m * frames + t)]));
    EXPECT_LE(worst, 1e-5) << key;
    // The padding after the speech: every frame from `pad_from` on equals the oracle's column.
    const std::vector<float> pad = want["pad_column"].get<std::vector<float>>();
    const int pad_from = want["pad_from"].get<int>();
    for (int m = 0; m < n_mels; ++m)
      for (int t = pad_from; t < LogMel::kFrames; t += 97)
        EXPECT_NEAR(got[static_cast<size_t>(m) * LogMel::kFrames + t], pad[static_cast<size_t>(m)], 1e-5);
    double sum = 0;
    for (float v : got) sum += v;
    EXPECT_NEAR(sum / static_cast<double>(got.size()), want["mean"].get<double>(), 1e-6) << key;
    std::printf("%s: worst |corvid - transformers| %.3g\n", key, worst);
  }
}

TEST(LogMel, WithinTheFloat32Reference) {
  const Audio wav = read_file((audio_dir() / "speech_16k.wav").string());
  const std::vector<float> got = LogMel(80).features(wav.samples);
  const std::vector<float> want = array_of<float>(audio_dir() / "log_mel_n80_torch.f32");
  const int frames = static_cast<int>(want.size() / 80);
  double worst = 0;
  for (int m = 0; m < 80; ++m)
    for (int t = 0; t < frames; ++t)
      worst = std::max(worst, std::abs(static_cast<double>(got[static_cast<size_t>(m) * LogMel::kFrames + t]) -
                                       want[static_cast<size_t>(m * frames + t)]));
  EXPECT_LE(worst, 5e-5);
}

TEST(LogMel, FiltersAreSlaneys) {
  const LogMel mel(80);
  const std::vector<double> want = array_of<double>(audio_dir() / "mel_filters_n80.f64");  // [80, 201]
  ASSERT_EQ(want.size(), mel.filters().size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(mel.filters()[i], want[i], 1e-9) << i;
  EXPECT_THROW(LogMel(64), Error);
}

}  // namespace
}  // namespace corvid::audio
