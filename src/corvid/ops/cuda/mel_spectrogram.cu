// CudaMelPower (mel_spectrogram.h): frames under the window, one batched D2Z cuFFT per
// chunk of frames, then each frame's power through the filters and log10, in double.
// The filter sum runs over the bins in the CPU's order; what differs from the CPU is
// cuFFT's rounding, ~1e-16 of a frame's energy.
#include <cufft.h>

#include <algorithm>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/mel_spectrogram.h"

#define CORVID_CUFFT_CHECK(call)                                                              \
  do {                                                                                        \
    const cufftResult corvid_fft_ = (call);                                                   \
    if (corvid_fft_ != CUFFT_SUCCESS)                                                         \
      ::corvid::fail("cuFFT error ", static_cast<int>(corvid_fft_), ": ", #call, " at ", __FILE__, ":", \
                     __LINE__);                                                               \
  } while (0)

namespace corvid::ops::cuda {

namespace {

constexpr int kFft = audio::LogMel::kFft, kHop = audio::LogMel::kHop, kBins = audio::LogMel::kBins;
constexpr int kThreads = 256;

// frames[t][i] = x[t * kHop + i] * window[i] for the chunk's n frames; zeros after them
// (the plan always transforms kChunkFrames).
__global__ void window_frames_kernel(const double* x, const double* window, int64_t n, double* frames,
                                     int64_t count) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= count) return;
  const int64_t t = j / kFft, i = j % kFft;
  frames[j] = t < n ? x[t * kHop + i] * window[i] : 0.0;
}

// One block per frame: its power spectrum in shared memory, then one thread per mel bin
// sums filter * power over the bins in order and takes log10 of max(sum, 1e-10).
__global__ void mel_log_kernel(const cufftDoubleComplex* spectrum, const double* filters, int n_mels, int64_t n,
                               double* out) {
  __shared__ double power[kBins];
  const int64_t t = blockIdx.x;
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
    const cufftDoubleComplex z = spectrum[t * kBins + b];
    power[b] = z.x * z.x + z.y * z.y;
  }
  __syncthreads();
  for (int m = threadIdx.x; m < n_mels; m += blockDim.x) {
    const double* w = filters + static_cast<int64_t>(m) * kBins;
    double sum = 0;
    for (int b = 0; b < kBins; ++b) sum = __dadd_rn(sum, __dmul_rn(w[b], power[b]));  // no FMA: the CPU's rounding
    out[m * n + t] = log10(fmax(sum, 1e-10));
  }
}

}  // namespace

struct CudaMelPower::State {
  int n_mels = 0;
  cufftHandle plan = 0;
  bool planned = false;
  double *window = nullptr, *filters = nullptr, *x = nullptr, *frames = nullptr, *out = nullptr;
  cufftDoubleComplex* spectrum = nullptr;

  ~State() {
    if (planned) cufftDestroy(plan);
    for (void* p : {static_cast<void*>(window), static_cast<void*>(filters), static_cast<void*>(x),
                    static_cast<void*>(frames), static_cast<void*>(out), static_cast<void*>(spectrum)})
      if (p) cudaFree(p);
  }
};

CudaMelPower::CudaMelPower(const audio::LogMel& mel) : s_(std::make_unique<State>()) {
  Context& c = context();
  CORVID_CHECK(!c.capturing, "CUDA: log-mel set up while recording a step");
  State& s = *s_;
  s.n_mels = mel.n_mels();
  const size_t x_values = static_cast<size_t>((kChunkFrames - 1) * kHop + kFft);
  CORVID_CUDA_CHECK(cudaMalloc(&s.window, sizeof(double) * kFft));
  CORVID_CUDA_CHECK(cudaMalloc(&s.filters, sizeof(double) * mel.filters().size()));
  CORVID_CUDA_CHECK(cudaMalloc(&s.x, sizeof(double) * x_values));
  CORVID_CUDA_CHECK(cudaMalloc(&s.frames, sizeof(double) * kChunkFrames * kFft));
  CORVID_CUDA_CHECK(cudaMalloc(&s.spectrum, sizeof(cufftDoubleComplex) * kChunkFrames * kBins));
  CORVID_CUDA_CHECK(cudaMalloc(&s.out, sizeof(double) * kChunkFrames * s.n_mels));
  CORVID_CUDA_CHECK(cudaMemcpyAsync(s.window, mel.window().data(), sizeof(double) * kFft, cudaMemcpyHostToDevice,
                                    c.stream));
  CORVID_CUDA_CHECK(cudaMemcpyAsync(s.filters, mel.filters().data(), sizeof(double) * mel.filters().size(),
                                    cudaMemcpyHostToDevice, c.stream));
  int n[1] = {kFft};
  CORVID_CUFFT_CHECK(cufftPlanMany(&s.plan, 1, n, nullptr, 1, kFft, nullptr, 1, kBins, CUFFT_D2Z,
                                   static_cast<int>(kChunkFrames)));
  s.planned = true;
  CORVID_CUFFT_CHECK(cufftSetStream(s.plan, c.stream));
  CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));  // the host tables may go
}

CudaMelPower::~CudaMelPower() {
  // Earlier work on the stream may still read the buffers.
  if (cudaStreamSynchronize(context().stream) != cudaSuccess) cudaGetLastError();
}

std::vector<double> CudaMelPower::log_mel(std::span<const double> x, int64_t frames) {
  Context& c = context();
  CORVID_CHECK(!c.capturing, "CUDA: log-mel while recording a step");
  State& s = *s_;
  CORVID_CHECK(frames >= 0 && (frames == 0 || static_cast<int64_t>(x.size()) >= (frames - 1) * kHop + kFft),
               "log-mel: ", x.size(), " samples hold fewer than ", frames, " frames");
  std::vector<double> out(static_cast<size_t>(s.n_mels * frames));
  for (int64_t t0 = 0; t0 < frames; t0 += kChunkFrames) {
    const int64_t n = std::min(kChunkFrames, frames - t0);
    count_op();
    CORVID_CUDA_CHECK(cudaMemcpyAsync(s.x, x.data() + t0 * kHop, sizeof(double) * ((n - 1) * kHop + kFft),
                                      cudaMemcpyHostToDevice, c.stream));
    const int64_t count = kChunkFrames * kFft;
    window_frames_kernel<<<blocks_for(count, kThreads), kThreads, 0, c.stream>>>(s.x, s.window, n, s.frames, count);
    CORVID_CUDA_LAUNCHED("window_frames_kernel");
    CORVID_CUFFT_CHECK(cufftExecD2Z(s.plan, s.frames, s.spectrum));
    mel_log_kernel<<<static_cast<unsigned>(n), 128, 0, c.stream>>>(s.spectrum, s.filters, s.n_mels, n, s.out);
    CORVID_CUDA_LAUNCHED("mel_log_kernel");
    // [n_mels, n] of the chunk into columns t0.. of the [n_mels, frames] answer.
    CORVID_CUDA_CHECK(cudaMemcpy2DAsync(out.data() + t0, sizeof(double) * frames, s.out, sizeof(double) * n,
                                        sizeof(double) * n, s.n_mels, cudaMemcpyDeviceToHost, c.stream));
  }
  CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  return out;
}

}  // namespace corvid::ops::cuda
