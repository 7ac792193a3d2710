// Whisper's front end on the GPU: the STFT power of the centred signal through the mel
// filters, with cuFFT (D2Z, in double like the CPU's KISS FFT path, so that features
// stay within 1e-5 of transformers' float64 extractor even near the max-8 floor, where
// a float32 FFT's error relative to the frame's energy would show). Plain C++: no CUDA
// includes. Runs on the backend's stream, so it is one thread's, like every other op.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "corvid/audio/log_mel.h"

namespace corvid::ops::cuda {

class CudaMelPower final : public audio::MelPowerBackend {
 public:
  // The window and filters of `mel` go to the device once; the cuFFT plan is made here.
  explicit CudaMelPower(const audio::LogMel& mel);
  ~CudaMelPower() override;
  CudaMelPower(const CudaMelPower&) = delete;
  CudaMelPower& operator=(const CudaMelPower&) = delete;

  std::vector<double> log_mel(std::span<const float> samples, int64_t length, int64_t frames) override;

  // Frames transformed per cuFFT call: a long recording goes through in chunks of this.
  static constexpr int64_t kChunkFrames = 4096;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace corvid::ops::cuda
