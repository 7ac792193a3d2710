#include "corvid/audio/log_mel.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <complex>

#include <unsupported/Eigen/FFT>

#include "corvid/core/error.h"

namespace corvid::audio {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kSampleRate = 16000.0;

// The Slaney mel scale (librosa's default, htk=False): linear below 1 kHz, logarithmic above.
double hertz_to_mel(double hz) {
  constexpr double kMinLogHz = 1000.0, kMinLogMel = 15.0;
  const double logstep = 27.0 / std::log(6.4);
  return hz >= kMinLogHz ? kMinLogMel + std::log(hz / kMinLogHz) * logstep : 3.0 * hz / 200.0;
}

double mel_to_hertz(double mel) {
  constexpr double kMinLogHz = 1000.0, kMinLogMel = 15.0;
  const double logstep = std::log(6.4) / 27.0;
  return mel >= kMinLogMel ? kMinLogHz * std::exp(logstep * (mel - kMinLogMel)) : 200.0 * mel / 3.0;
}

}  // namespace

LogMel::LogMel(int n_mels) : n_mels_(n_mels) {
  CORVID_CHECK(n_mels == 80 || n_mels == 128, "log-mel: ", n_mels, " mel bins (Whisper uses 80 or 128)");
  // Triangles between n_mels + 2 points evenly spaced in mel from 0 to 8 kHz, scaled by
  // 2 / (width in Hz) (Slaney's area norm), as transformers' mel_filter_bank makes them.
  std::vector<double> points(static_cast<size_t>(n_mels + 2));
  const double lo = hertz_to_mel(0.0), hi = hertz_to_mel(kSampleRate / 2);
  for (int i = 0; i < n_mels + 2; ++i) points[static_cast<size_t>(i)] = mel_to_hertz(lo + (hi - lo) * i / (n_mels + 1));
  filters_.assign(static_cast<size_t>(n_mels * kBins), 0.0);
  for (int m = 0; m < n_mels; ++m) {
    const double left = points[static_cast<size_t>(m)], center = points[static_cast<size_t>(m + 1)],
                 right = points[static_cast<size_t>(m + 2)];
    const double norm = 2.0 / (right - left);
    for (int b = 0; b < kBins; ++b) {
      const double f = (kSampleRate / 2) * b / (kBins - 1);
      const double down = (f - left) / (center - left), up = (right - f) / (right - center);
      filters_[static_cast<size_t>(m * kBins + b)] = std::max(0.0, std::min(down, up)) * norm;
    }
  }
  window_.resize(kFft);  // periodic Hann
  for (int i = 0; i < kFft; ++i) window_[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(2.0 * kPi * i / kFft);
}

namespace {

// The signal centred for the STFT: kFft / 2 samples reflected at each end (numpy's
// "reflect": the edge sample itself is not repeated).
std::vector<double> reflect_padded(std::span<const float> samples, size_t length) {
  constexpr size_t kPad = LogMel::kFft / 2;
  std::vector<double> x(length + 2 * kPad, 0.0);
  const size_t n = std::min(samples.size(), length);
  for (size_t i = 0; i < n; ++i) x[kPad + i] = samples[i];
  if (length <= kPad) return x;  // too short to reflect: zeros stand in
  for (size_t i = 0; i < kPad; ++i) {
    x[kPad - 1 - i] = x[kPad + 1 + i];
    x[kPad + length + i] = x[kPad + length - 2 - i];
  }
  return x;
}

// A backend's answer, held to the shape asked of it.
std::vector<double> checked(std::vector<double> mel, int n_mels, int64_t frames) {
  CORVID_CHECK(mel.size() == static_cast<size_t>(n_mels * frames), "log-mel: the device gave ", mel.size(),
               " values for ", n_mels, " x ", frames);
  return mel;
}

}  // namespace

std::vector<double> LogMel::log_mel(const std::vector<double>& x, int64_t frames) const {
  Eigen::FFT<double> fft;  // its default backend: KISS FFT's mixed radix (400 = 4 * 4 * 5 * 5)
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<double> frame(kFft);
  std::vector<std::complex<double>> spectrum;
  std::vector<double> power(kBins);
  std::vector<double> mel(static_cast<size_t>(n_mels_ * frames));
  for (int64_t t = 0; t < frames; ++t) {
    const double* start = x.data() + static_cast<size_t>(t) * kHop;
    for (int i = 0; i < kFft; ++i) frame[static_cast<size_t>(i)] = start[i] * window_[static_cast<size_t>(i)];
    fft.fwd(spectrum, frame);
    for (int b = 0; b < kBins; ++b) power[static_cast<size_t>(b)] = std::norm(spectrum[static_cast<size_t>(b)]);
    for (int m = 0; m < n_mels_; ++m) {
      const double* w = filters_.data() + static_cast<size_t>(m) * kBins;
      double sum = 0;
      for (int b = 0; b < kBins; ++b) sum += w[b] * power[static_cast<size_t>(b)];
      mel[static_cast<size_t>(m * frames + t)] = std::log10(std::max(sum, 1e-10));
    }
  }
  return mel;
}

std::vector<float> LogMel::normalise(const std::vector<double>& mel) {
  const double top = mel.empty() ? 0.0 : *std::max_element(mel.begin(), mel.end());
  std::vector<float> out(mel.size());
  for (size_t i = 0; i < mel.size(); ++i) out[i] = static_cast<float>((std::max(mel[i], top - 8.0) + 4.0) / 4.0);
  return out;
}

std::vector<float> LogMel::features(std::span<const float> samples, MelPowerBackend* device) const {
  // The window: 30 s of samples, zeros after the audio.
  const std::span<const float> kept = samples.first(std::min<size_t>(samples.size(), kWindowSamples));
  if (device) return normalise(checked(device->log_mel(kept, kWindowSamples, kFrames), n_mels_, kFrames));
  return normalise(log_mel(reflect_padded(samples, kWindowSamples), kFrames));
}

std::vector<float> LogMel::spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames,
                                       MelPowerBackend* device) const {
  CORVID_CHECK(pad >= 0, "log-mel: negative padding");
  const size_t length = samples.size() + static_cast<size_t>(pad);
  const int64_t n = static_cast<int64_t>(length / kHop);
  if (frames) *frames = n;
  if (device) return normalise(checked(device->log_mel(samples, static_cast<int64_t>(length), n), n_mels_, n));
  return normalise(log_mel(reflect_padded(samples, length), n));
}

}  // namespace corvid::audio
