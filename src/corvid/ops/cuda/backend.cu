// The CUDA context and DeviceBackend: device memory through cudaMalloc (never
// managed memory), pinned mapped host memory for offloaded weights, copies on the
// backend's stream, scratch and upload caches.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

Context* make_context() {
  auto* c = new Context();
  CORVID_CUDA_CHECK(cudaSetDevice(c->device));
  cudaDeviceProp prop{};
  CORVID_CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  c->sm_count = prop.multiProcessorCount;
  c->sm90 = prop.major == 9 && prop.minor == 0;
  CORVID_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CORVID_CUBLAS_CHECK(cublasCreate(&c->cublas));
  CORVID_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
  // Plain FP32 GEMMs (no TF32): F32 activations must match the CPU reference to ~1e-6 relative.
  CORVID_CUBLAS_CHECK(cublasSetMathMode(c->cublas, CUBLAS_PEDANTIC_MATH));
  CORVID_CUBLAS_CHECK(cublasLtCreate(&c->cublas_lt));
  CORVID_CUDA_CHECK(cudaMalloc(&c->cublas_workspace, kCublasWorkspaceBytes));
  CORVID_CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_workspace, kCublasWorkspaceBytes));
  // Int8 activations of kGemvMaxCols decode rows up to 65536 wide (an 8B model's widest
  // producer output, silu_mul's, is 14336).
  c->reserve_int8_output(int64_t{kGemvMaxCols} << 16);
  return c;
}

class CudaBackend final : public DeviceBackend {
 public:
  void* allocate(size_t bytes) override {
    Context& c = context();
    CORVID_CHECK(!c.capturing, "CUDA: allocation while recording a step");
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail("CUDA: cannot allocate ", bytes, " bytes of device memory (", free_b, " of ", total_b,
           " bytes free): ", cudaGetErrorString(err));
    }
    count_op();  // the memset writes device memory (a freed producer output's address may come back)
    CORVID_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c.stream));
    return p;
  }
  void* allocate_host_mapped(size_t bytes) override {
    Context& c = context();
    CORVID_CHECK(!c.capturing, "CUDA: allocation while recording a step");
    void* p = nullptr;
    // Write-combined: the host only writes it (the upload); the GPU's reads over the
    // link then need no snoop of the host's caches.
    const cudaError_t err =
        cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable | cudaHostAllocWriteCombined);
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail("CUDA: cannot pin ", bytes, " bytes of host memory for offloaded weights: ", cudaGetErrorString(err));
    }
    void* dev = nullptr;
    CORVID_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
    if (dev != p) {  // no unified addressing: one pointer could not serve kernels and copies
      cudaFreeHost(p);
      fail("CUDA: pinned host memory has another address on the GPU (no unified addressing)");
    }
    count_op();  // the memset writes what kernels read
    CORVID_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c.stream));
    return p;
  }
  void release_host_mapped(void* ptr) noexcept override {
    if (cudaStreamSynchronize(context().stream) != cudaSuccess || cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
  }
  void release(void* ptr) noexcept override {
    // cudaFree waits for the device, so kernels still reading ptr finish first. Errors
    // (e.g. the driver already shut down at process exit) cannot be reported from here.
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    count_op();  // it writes device memory: int8 activations made before may no longer describe it
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, context().stream));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    Context& c = context();
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c.stream));
    CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    count_op();  // it writes device memory: int8 activations made before may no longer describe it
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, context().stream));
  }
  void synchronize() override { CORVID_CUDA_CHECK(cudaStreamSynchronize(context().stream)); }



  bool supports_capture() const override { return true; }
  uint64_t layout_generation() const override { return context().generation; }
  void begin_capture() override {
    Context& c = context();
    CORVID_CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    c.capturing = true;
  }
  int64_t end_capture() override {
    Context& c = context();
    c.capturing = false;
    cudaGraph_t graph = nullptr;
    CORVID_CUDA_CHECK(cudaStreamEndCapture(c.stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CORVID_CUDA_CHECK(err);
    graphs_[next_id_] = exec;
    return next_id_++;
  }
  void abort_capture() noexcept override {
    Context& c = context();
    c.capturing = false;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(c.stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // capture errors are sticky until read
  }
  void replay(int64_t id) override {
    count_op();  // a recorded step's ops
    auto it = graphs_.find(id);
    CORVID_CHECK(it != graphs_.end(), "CUDA: no recorded step ", id);
    CORVID_CUDA_CHECK(cudaGraphLaunch(it->second, context().stream));
  }
  void drop(int64_t id) noexcept override {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    cudaGraphExecDestroy(it->second);
    graphs_.erase(it);
  }
  std::string description() const override {
    cudaDeviceProp prop{};
    CORVID_CUDA_CHECK(cudaGetDeviceProperties(&prop, context().device));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
  }
  MemoryInfo memory_info() const override {
    MemoryInfo info;
    CORVID_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
    return info;
  }

 private:
  std::map<int64_t, cudaGraphExec_t> graphs_;
  int64_t next_id_ = 0;
};

}  // namespace

bool pdl_enabled() {
  static const bool on = !env_flag("CORVID_NO_PDL");
  return on;
}

bool gemm_operand_fusion() {
  static const bool on = !env_flag("CORVID_NO_FUSED_OPERAND");
  return on;
}

bool profile_skipped(const char* name) {
  static const std::vector<std::string> skipped = [] {
    std::vector<std::string> names;
    const char* v = std::getenv("CORVID_PROFILE_SKIP");
    if (v == nullptr || *v == 0) return names;
    std::fprintf(stderr, "corvid: CORVID_PROFILE_SKIP=%s: these kernels do not run, outputs are wrong (profiling only)\n", v);
    for (const char* p = v; *p != 0;) {
      const char* end = std::strchr(p, ',');
      if (end == nullptr) end = p + std::strlen(p);
      names.emplace_back(p, end);
      p = *end == ',' ? end + 1 : end;
    }
    return names;
  }();
  if (skipped.empty()) return false;
  return std::find(skipped.begin(), skipped.end(), name) != skipped.end();
}

Context& context() {
  // Created once and never destroyed: tearing down a stream or cuBLAS handle during
  // static destruction races the driver's own shutdown.
  static Context* c = make_context();
  return *c;
}

namespace {

// A device buffer of at least `bytes` in `buffer` (capacity in `capacity`), reallocated
// when too small: recorded graphs hold its address, so that bumps the generation.
void* grow_buffer(Context& c, void*& buffer, size_t& capacity, size_t bytes, const char* what) {
  if (bytes > capacity) {
    CORVID_CHECK(!c.capturing, "CUDA: ", what, " would grow while recording a step");
    ++c.generation;
    if (buffer) {
      CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));  // earlier kernels may still read it
      CORVID_CUDA_CHECK(cudaFree(buffer));
      buffer = nullptr;
    }
    const size_t rounded = (bytes + (1u << 20) - 1) & ~size_t((1u << 20) - 1);
    CORVID_CUDA_CHECK(cudaMalloc(&buffer, rounded));
    capacity = rounded;
  }
  return buffer;
}

}  // namespace

void* Context::scratch(size_t bytes) { return grow_buffer(*this, scratch_, scratch_bytes_, bytes, "scratch"); }

void Context::reserve_int8_output(int64_t values) {
  grow_buffer(*this, int8_, int8_bytes_, int8_activation_bytes(values), "the int8 activation buffer");
}

const Context::Int8Rows& Context::int8_output(const void* x, int64_t rows, int64_t cols) {
  const int64_t values = rows * cols;
  const size_t bytes = int8_activation_bytes(values);
  // Only what a decode GEMV would quantize (Fast numerics, its last GEMV took int8, a
  // few rows of whole 32-value blocks); and nothing may allocate while a step is
  // recorded: then this step's producers skip int8 (their GEMVs quantize x themselves;
  // make_context reserves enough for decode rows of any usual width, so this is rare).
  if (!gemv_int8_inputs() || rows < 1 || rows > kGemvMaxCols || cols % 32 != 0 || (capturing && bytes > int8_bytes_)) {
    int8_rows = {};
    return int8_rows;
  }
  auto* base = static_cast<uint8_t*>(grow_buffer(*this, int8_, int8_bytes_, bytes, "the int8 activation buffer"));
  int8_rows = {{x, rows, cols, ops_run}, reinterpret_cast<int8_t*>(base),
               reinterpret_cast<float*>(base + int8_scales_offset(values))};
  return int8_rows;
}

uint16_t* Context::gemm_operand_buffer(int64_t values) {
  return static_cast<uint16_t*>(grow_buffer(*this, operand16_, operand16_bytes_, static_cast<size_t>(values) * 2,
                                            "the prompt GEMM operand buffer"));
}

const Context::GemmOperand& Context::gemm_operand_output(const void* x, int64_t rows, int64_t cols) {
  if (!gemm_operand_fusion() || quantized_matmul() != QuantizedMatmul::Fast || rows <= kGemvMaxCols || cols % 8 != 0 ||
      capturing) {
    gemm_operand = {};
    return gemm_operand;
  }
  gemm_operand = {{x, rows, cols, ops_run}, gemm_operand_f16, gemm_operand_buffer(rows * cols)};
  return gemm_operand;
}

void count_op() { ++context().ops_run; }

const void* Context::upload_bytes(UploadSlot slot, const void* data, size_t bytes) {
  Upload& u = uploads_[static_cast<int>(slot)];
  if (u.dev && u.host.size() == bytes && std::memcmp(u.host.data(), data, bytes) == 0) return u.dev;
  // A recorded step must read inputs already on the device (ops::Indices::device), not upload new ones.
  CORVID_CHECK(!capturing, "CUDA: host data changed while recording a step (upload slot ", static_cast<int>(slot), ")");
  if (bytes > u.capacity) {
    ++generation;
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

const float* Context::constant(std::span<const float> values) {
  std::vector<float> key(values.begin(), values.end());
  auto it = constants_.find(key);
  if (it != constants_.end()) return static_cast<const float*>(it->second);
  CORVID_CHECK(!capturing, "CUDA: new constant table while recording a step");
  void* dev = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&dev, std::max<size_t>(values.size_bytes(), 4)));
  if (!values.empty())
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dev, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream));
  constants_.emplace(std::move(key), dev);
  return static_cast<const float*>(dev);
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
