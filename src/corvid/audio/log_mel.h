// Whisper's front end: the log-mel spectrogram of one 30-second window, computed as
// transformers' WhisperFeatureExtractor (and openai-whisper) compute it. The samples
// (16 kHz mono) are cut or padded with zeros to 30 s, reflect-padded by n_fft / 2 at
// both ends, cut into frames of 400 every 160 under a periodic Hann window, and each
// frame's power spectrum (KISS FFT's algorithm, in double: Eigen's FFT) goes through 80 or 128 Slaney mel
// filters; then log10 of max(1e-10, ·), clamped to the maximum less 8, and (x + 4) / 4.
// The last frame is dropped, so a window is [n_mels, 3000].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace corvid::audio {

class LogMel {
 public:
  static constexpr int kFft = 400, kHop = 160, kWindowSamples = 480000, kFrames = 3000;

  explicit LogMel(int n_mels);  // 80 (Whisper v1-v2) or 128 (large-v3)

  int n_mels() const { return n_mels_; }
  // The features of the window starting at samples[0]: [n_mels, kFrames] row-major.
  std::vector<float> features(std::span<const float> samples) const;
  // The mel filter bank [n_mels, kFft / 2 + 1] (Slaney scale and norm), for tests.
  const std::vector<double>& filters() const { return filters_; }

 private:
  int n_mels_;
  std::vector<double> filters_;
  std::vector<double> window_;
};

}  // namespace corvid::audio
