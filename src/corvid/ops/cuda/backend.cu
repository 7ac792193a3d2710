// The CUDA context and DeviceBackend: device memory through cudaMalloc (never
// managed memory), copies on the backend's stream, scratch and upload caches.
#include <cstring>
#include <string>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"

namespace corvid::ops::cuda {

namespace {

Context* make_context() {
  auto* c = new Context();
  CORVID_CUDA_CHECK(cudaSetDevice(c->device));
  cudaDeviceProp prop{};
  CORVID_CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  c->sm_count = prop.multiProcessorCount;
  CORVID_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CORVID_CUBLAS_CHECK(cublasCreate(&c->cublas));
  CORVID_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
  // Plain FP32 GEMMs (no TF32): F32 activations must match the CPU reference to ~1e-6 relative.
  CORVID_CUBLAS_CHECK(cublasSetMathMode(c->cublas, CUBLAS_PEDANTIC_MATH));
  return c;
}

class CudaBackend final : public DeviceBackend {
 public:
  void* allocate(size_t bytes) override {
    Context& c = context();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail("CUDA: cannot allocate ", bytes, " bytes of device memory (", free_b, " of ", total_b,
           " bytes free): ", cudaGetErrorString(err));
    }
    CORVID_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c.stream));
    return p;
  }
  void release(void* ptr) noexcept override {
    // cudaFree waits for the device, so kernels still reading ptr finish first. Errors
    // (e.g. the driver already shut down at process exit) cannot be reported from here.
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, context().stream));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    Context& c = context();
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c.stream));
    CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, context().stream));
  }
  void synchronize() override { CORVID_CUDA_CHECK(cudaStreamSynchronize(context().stream)); }
  std::string description() const override {
    cudaDeviceProp prop{};
    CORVID_CUDA_CHECK(cudaGetDeviceProperties(&prop, context().device));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
  }
};

}  // namespace

Context& context() {
  // Created once and never destroyed: tearing down a stream or cuBLAS handle during
  // static destruction races the driver's own shutdown.
  static Context* c = make_context();
  return *c;
}

void* Context::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) {
      CORVID_CUDA_CHECK(cudaStreamSynchronize(stream));  // earlier kernels may still read it
      CORVID_CUDA_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
    }
    const size_t rounded = (bytes + (1u << 20) - 1) & ~size_t((1u << 20) - 1);
    CORVID_CUDA_CHECK(cudaMalloc(&scratch_, rounded));
    scratch_bytes_ = rounded;
  }
  return scratch_;
}

const void* Context::upload_bytes(UploadSlot slot, const void* data, size_t bytes) {
  Upload& u = uploads_[static_cast<int>(slot)];
  if (u.dev && u.host.size() == bytes && std::memcmp(u.host.data(), data, bytes) == 0) return u.dev;
  if (bytes > u.capacity) {
    if (u.dev) {
      CORVID_CUDA_CHECK(cudaStreamSynchronize(stream));
      CORVID_CUDA_CHECK(cudaFree(u.dev));
      u.dev = nullptr;
    }
    u.capacity = std::max<size_t>(bytes, 4096);
    CORVID_CUDA_CHECK(cudaMalloc(&u.dev, u.capacity));
  }
  u.host.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  // Stream-ordered after every kernel that read the old contents, so overwriting is safe.
  if (bytes) CORVID_CUDA_CHECK(cudaMemcpyAsync(u.dev, u.host.data(), bytes, cudaMemcpyHostToDevice, stream));
  return u.dev;
}

const int32_t* Context::upload(UploadSlot slot, std::span<const int32_t> values) {
  return static_cast<const int32_t*>(upload_bytes(slot, values.data(), values.size_bytes()));
}

const float* Context::upload(UploadSlot slot, std::span<const float> values) {
  return static_cast<const float*>(upload_bytes(slot, values.data(), values.size_bytes()));
}

bool available() {
  static const bool ok = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      return false;
    }
    try {
      context();
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  return ok;
}

DeviceBackend& backend() {
  static CudaBackend b;
  CORVID_CHECK(available(), "CUDA: no usable GPU (cudaGetDeviceCount found none, or the context failed)");
  return b;
}

}  // namespace corvid::ops::cuda
