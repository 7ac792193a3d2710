// Whisper's front end on the GPU (cuFFT, ops/cuda/mel_spectrogram.h): on real speech the
// features equal transformers' WhisperFeatureExtractor within 1e-5, as the CPU's do, and
// a recording longer than one cuFFT chunk gives the CPU's spectrogram across the chunk
// boundaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "binary_file_util.h"
#include "corvid/audio/audio_file.h"
#include "corvid/audio/log_mel.h"
#include "corvid/formats/json_file.h"
#include "corvid/ops/cuda/mel_spectrogram.h"
#include "cuda_test_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

fs::path audio_dir() { return fixtures::source_dir() / "tests" / "data" / "audio"; }

double worst(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

TEST(CudaLogMel, EqualsWhisperFeatureExtractor) {
  SKIP_WITHOUT_GPU();
  const audio::Audio wav = audio::read_file((audio_dir() / "speech_16k.wav").string());
  const nlohmann::json oracle = read_json_file((audio_dir() / "log_mel_oracle.json").string());
  for (const int n_mels : {80, 128}) {
    const audio::LogMel mel(n_mels);
    ops::cuda::CudaMelPower gpu(mel);
    const std::vector<float> got = mel.features(wav.samples, &gpu);
    const std::vector<float> cpu = mel.features(wav.samples);
    ASSERT_EQ(got.size(), cpu.size());
    const nlohmann::json& want = oracle["n" + std::to_string(n_mels)];
    const int frames = want["frames"].get<int>();
    const std::vector<float> head =
        fixtures::array_of<float>(audio_dir() / ("log_mel_n" + std::to_string(n_mels) + ".f32"));
    double err = 0;
    for (int m = 0; m < n_mels; ++m)
      for (int t = 0; t < frames; ++t)
        err = std::max(err, std::abs(static_cast<double>(got[static_cast<size_t>(m) * audio::LogMel::kFrames + t]) -
                                     head[static_cast<size_t>(m * frames + t)]));
    EXPECT_LE(err, 1e-5) << n_mels;
    const double vs_cpu = worst(got, cpu);
    EXPECT_LE(vs_cpu, 1e-6) << n_mels;
    std::printf("n_mels %d: cuFFT features within %.3g of transformers, %.3g of the CPU\n", n_mels, err, vs_cpu);
  }
}

// 100 s of speech (the clip over and over, with a little noise so no two frames repeat):
// 10,001 frames, three chunks of the plan, the last partial; and a recording shorter than
// one frame.
TEST(CudaLogMel, LongRecordingsCrossChunksAsTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  const audio::Audio wav = audio::read_file((audio_dir() / "speech_16k.wav").string());
  std::vector<float> samples(1600000);
  uint32_t state = 12345;
  for (size_t i = 0; i < samples.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    samples[i] = wav.samples[i % wav.samples.size()] + 1e-3f * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  const audio::LogMel mel(128);
  ops::cuda::CudaMelPower gpu(mel);
  int64_t frames_gpu = 0, frames_cpu = 0;
  const std::vector<float> got = mel.spectrogram(samples, audio::LogMel::kHop, &frames_gpu, &gpu);
  const std::vector<float> want = mel.spectrogram(samples, audio::LogMel::kHop, &frames_cpu);
  ASSERT_EQ(frames_gpu, frames_cpu);
  ASSERT_GT(frames_gpu, 2 * ops::cuda::CudaMelPower::kChunkFrames);
  ASSERT_EQ(got.size(), want.size());
  const double err = worst(got, want);
  EXPECT_LE(err, 1e-6);
  std::printf("%lld frames: cuFFT spectrogram within %.3g of the CPU's\n", static_cast<long long>(frames_gpu), err);

  const std::vector<float> few(100, 0.25f);
  int64_t f1 = 0, f2 = 0;
  const std::vector<float> a = mel.spectrogram(few, audio::LogMel::kHop, &f1, &gpu);
  const std::vector<float> b = mel.spectrogram(few, audio::LogMel::kHop, &f2);
  EXPECT_EQ(f1, f2);
  EXPECT_LE(worst(a, b), 1e-6);
}

}  // namespace
}  // namespace corvid
