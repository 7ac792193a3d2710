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

// Where the STFT power through the mel filters is computed when not on the CPU (a GPU:
// ops/cuda/mel_spectrogram.h), in double like LogMel's own path.
class MelPowerBackend {
 public:
  virtual ~MelPowerBackend() = default;
  // log10(max(1e-10, mel power)) of `frames` frames of the centred signal: `samples`
  // followed by zeros up to `length`, reflect-padded by kFft / 2 at both ends as LogMel
  // pads it (zeros instead where length <= kFft / 2); frame t is padded samples
  // [t * kHop, t * kHop + kFft) under the window. [n_mels, frames] row-major.
  virtual std::vector<double> log_mel(std::span<const float> samples, int64_t length, int64_t frames) = 0;
};

class LogMel {
 public:
  static constexpr int kFft = 400, kHop = 160, kWindowSamples = 480000, kFrames = 3000;
  static constexpr int kBins = kFft / 2 + 1;

  explicit LogMel(int n_mels);  // 80 (Whisper v1-v2) or 128 (large-v3)

  int n_mels() const { return n_mels_; }
  // The features of the window starting at samples[0]: [n_mels, kFrames] row-major.
  // `device`, when given, computes the mel power (the rest is the same host code).
  std::vector<float> features(std::span<const float> samples, MelPowerBackend* device = nullptr) const;
  // The features of a whole recording, as faster-whisper computes them for long-form
  // transcription: the samples followed by `pad` zeros (160: one hop) form one signal,
  // every frame of it is kept, and one clamp (the maximum less 8) covers them all.
  // [n_mels, frames] row-major with frames = (samples + pad) / 160.
  std::vector<float> spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames,
                                 MelPowerBackend* device = nullptr) const;
  // The mel filter bank [n_mels, kBins] (Slaney scale and norm) and the periodic Hann
  // window [kFft]: what a MelPowerBackend applies.
  const std::vector<double>& filters() const { return filters_; }
  const std::vector<double>& window() const { return window_; }

 private:
  // log10 of the mel power of `frames` frames of the reflect-padded signal x.
  std::vector<double> log_mel(const std::vector<double>& x, int64_t frames) const;
  static std::vector<float> normalise(const std::vector<double>& log_mel);

  int n_mels_;
  std::vector<double> filters_;
  std::vector<double> window_;
};

}  // namespace corvid::audio
