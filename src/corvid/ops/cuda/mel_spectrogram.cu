// CudaMelPower (mel_spectrogram.h): per chunk of frames, the float samples it reads go
// up (the centring's reflection is done on the device, as LogMel's reflect_padded does
// it), the frames are windowed in double, one batched D2Z cuFFT transforms them, and each
// frame's power goes through the filters and log10. The answer comes back through a
// pinned buffer in one contiguous copy per chunk. The filter sum runs over the bins in
// the CPU's order; what differs from the CPU is cuFFT's rounding, ~1e-16 of a frame's
// energy.
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

// Where the signal is read: which samples a chunk's frames touch, and how a padded
// position maps to a sample (the signal is `samples` then zeros up to `length`; the
// kFft / 2 positions before and after it mirror it without repeating the edge, or are
// zeros where length <= kFft / 2, as in log_mel.cc reflect_padded).
struct Signal {
  const float* chunk = nullptr;  // samples [first, first + count) on the device
  int64_t first = 0, count = 0, samples = 0, length = 0;

  __device__ double at(int64_t padded) const {
    int64_t s = padded - kFft / 2;
    if (length <= kFft / 2) {
      if (s < 0 || s >= length) return 0.0;
    } else if (s < 0) {
      s = -s;
    } else if (s >= length) {
      s = 2 * (length - 1) - s;
    }
    return s < samples ? static_cast<double>(chunk[s - first]) : 0.0;
  }
};

// frames[t][i] = signal[(t0 + t) * kHop + i] * window[i] for the chunk's n frames; zeros
// after them (the plan always transforms kChunkFrames).
__global__ void window_frames_kernel(Signal x, int64_t t0, const double* window, int64_t n, double* frames,
                                     int64_t count) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= count) return;
  const int64_t t = j / kFft, i = j % kFft;
  frames[j] = t < n ? x.at((t0 + t) * kHop + i) * window[i] : 0.0;
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

// The samples a chunk of kChunkFrames frames reads: its frames' span plus the centring
// on both sides.
constexpr int64_t kChunkSamples = (CudaMelPower::kChunkFrames - 1) * kHop + kFft + 1;

struct CudaMelPower::State {
  int n_mels = 0;
  cufftHandle plan = 0;
  bool planned = false;
  float* x = nullptr;
  double *window = nullptr, *filters = nullptr, *frames = nullptr, *out = nullptr;
  cufftDoubleComplex* spectrum = nullptr;
  double* out_host = nullptr;  // pinned: a chunk's answer, [n_mels, n]

  ~State() {
    if (planned) cufftDestroy(plan);
    for (void* p : {static_cast<void*>(window), static_cast<void*>(filters), static_cast<void*>(x),
                    static_cast<void*>(frames), static_cast<void*>(out), static_cast<void*>(spectrum)})
      if (p) cudaFree(p);
    if (out_host) cudaFreeHost(out_host);
  }
};

CudaMelPower::CudaMelPower(const audio::LogMel& mel) : s_(std::make_unique<State>()) {
  Context& c = context();
  CORVID_CHECK(!c.capturing, "CUDA: log-mel set up while recording a step");
  State& s = *s_;
  s.n_mels = mel.n_mels();
  CORVID_CUDA_CHECK(cudaMalloc(&s.window, sizeof(double) * kFft));
  CORVID_CUDA_CHECK(cudaMalloc(&s.filters, sizeof(double) * mel.filters().size()));
  CORVID_CUDA_CHECK(cudaMalloc(&s.x, sizeof(float) * kChunkSamples));
  CORVID_CUDA_CHECK(cudaMallocHost(&s.out_host, sizeof(double) * kChunkFrames * s.n_mels));
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

std::vector<double> CudaMelPower::log_mel(std::span<const float> samples, int64_t length, int64_t frames) {
  Context& c = context();
  CORVID_CHECK(!c.capturing, "CUDA: log-mel while recording a step");
  State& s = *s_;
  const int64_t have = static_cast<int64_t>(samples.size());
  CORVID_CHECK(frames >= 0 && length >= have && frames <= length / kHop + 1, "log-mel: ", frames,
               " frames of a signal of ", length, " samples");
  std::vector<double> out(static_cast<size_t>(s.n_mels * frames));
  for (int64_t t0 = 0; t0 < frames; t0 += kChunkFrames) {
    const int64_t n = std::min(kChunkFrames, frames - t0);
    // Padded positions [t0 * kHop, (t0 + n - 1) * kHop + kFft) are samples kFft / 2 before
    // that; the mirrored ones fall inside the same span and one sample more (the first
    // chunk's position 0 mirrors sample kFft / 2), at most kChunkSamples.
    Signal x;
    x.samples = have;
    x.length = length;
    x.first = std::clamp<int64_t>(t0 * kHop - kFft / 2, 0, have);
    x.count = std::clamp<int64_t>((t0 + n - 1) * kHop + kFft / 2 + 1, 0, have) - x.first;
    x.chunk = s.x;
    count_op();
    if (x.count > 0)
      CORVID_CUDA_CHECK(cudaMemcpyAsync(s.x, samples.data() + x.first, sizeof(float) * x.count,
                                        cudaMemcpyHostToDevice, c.stream));
    const int64_t count = kChunkFrames * kFft;
    window_frames_kernel<<<blocks_for(count, kThreads), kThreads, 0, c.stream>>>(x, t0, s.window, n, s.frames,
                                                                                 count);
    CORVID_CUDA_LAUNCHED("window_frames_kernel");
    CORVID_CUFFT_CHECK(cufftExecD2Z(s.plan, s.frames, s.spectrum));
    mel_log_kernel<<<static_cast<unsigned>(n), 128, 0, c.stream>>>(s.spectrum, s.filters, s.n_mels, n, s.out);
    CORVID_CUDA_LAUNCHED("mel_log_kernel");
    CORVID_CUDA_CHECK(cudaMemcpyAsync(s.out_host, s.out, sizeof(double) * s.n_mels * n, cudaMemcpyDeviceToHost,
                                      c.stream));
    CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    // [n_mels, n] of the chunk into columns t0.. of the [n_mels, frames] answer.
    for (int64_t m = 0; m < s.n_mels; ++m)
      std::copy_n(s.out_host + m * n, n, out.data() + m * frames + t0);
  }
  return out;
}

}  // namespace corvid::ops::cuda
