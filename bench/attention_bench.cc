// Prefill attention on the GPU at the Llama-3.1-8B shape (32 query heads, 8 KV heads,
// head_dim 128), causal, positions 0..n-1, against the bf16 GEMM rate.
//
//   cmake -S . -B build-cuda -G Ninja -DCORVID_CUDA=ON -DCORVID_BENCH=ON && cmake --build build-cuda --target corvid_attention_bench
//   ./build-cuda/corvid_attention_bench [N ...]        # default: 512 2048 8192
//
// Times ops::attention (the tensor-core prefill kernel, QuantizedMatmul::Fast) with
// CUDA events over repeated calls, for a BF16 and an F32 KV cache. TFLOP/s counts the
// causal work only: 4 * head_dim * heads per (query, visible key) pair (Q K^T and P V,
// a multiply-add = 2 FLOPs). The last column is the attention time of one layer
// scaled to the 32 layers of a prefill, per prompt token, for comparison with a
// whole prefill step. The fp32 kernel (Exact numerics) is timed at the first N for scale.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/core/tensor.h"
#include "corvid/ops/ops.h"
#include "cuda_timing.h"

namespace corvid {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kLayers = 32;

struct DeviceArray {
  void* ptr = nullptr;
  explicit DeviceArray(size_t bytes) { CORVID_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(DeviceArray&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray& operator=(DeviceArray&&) = delete;
};

// n random values N(0, 1) on the device, as F32 or as BF16 bits.
DeviceArray random_device(size_t n, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> f(n);
  for (float& v : f) v = dist(rng);
  if (t == DType::F32) {
    DeviceArray a(n * sizeof(float));
    CORVID_CUDA_CHECK(cudaMemcpy(a.ptr, f.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return a;
  }
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(f[i]);
  DeviceArray a(n * sizeof(uint16_t));
  CORVID_CUDA_CHECK(cudaMemcpy(a.ptr, b.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
  return a;
}

// Microseconds per ops::attention call on a causal prompt of n tokens.
double time_attention(int64_t n, DType cache_dtype) {
  const size_t q_elems = static_cast<size_t>(n * kHeads * kHeadDim), kv_elems = static_cast<size_t>(n * kKvHeads * kHeadDim);
  DeviceArray q = random_device(q_elems, DType::F32, 1), k = random_device(kv_elems, cache_dtype, 2),
              v = random_device(kv_elems, cache_dtype, 3), out(q_elems * sizeof(float));
  const Tensor qt(DType::F32, {n, kHeads, kHeadDim}, q.ptr, Device::CUDA);
  const Tensor kt(cache_dtype, {n, kKvHeads, kHeadDim}, k.ptr, Device::CUDA);
  const Tensor vt(cache_dtype, {n, kKvHeads, kHeadDim}, v.ptr, Device::CUDA);
  const Tensor ot(DType::F32, {n, kHeads, kHeadDim}, out.ptr, Device::CUDA);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const int calls = n >= 8192 ? 10 : 50;
  return bench::time_calls(calls, [&](int) { ops::attention(qt, kt, vt, positions, scale, 0, ot); });
}

void report(const char* kernel, int64_t n, DType cache_dtype, double us) {
  const double pairs = static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;
  const double tflops = 4.0 * kHeadDim * kHeads * pairs / (us * 1e6);
  const double us_per_token = us * kLayers / static_cast<double>(n);
  std::printf("%-6s n=%-6lld cache %-4s %10.1f us  %7.1f TFLOP/s  %7.2f us/token (32 layers)\n", kernel,
              static_cast<long long>(n), std::string(dtype_name(cache_dtype)).c_str(), us, tflops, us_per_token);
}

}  // namespace
}  // namespace corvid

int main(int argc, char** argv) {
  using namespace corvid;
  try {
    std::vector<int64_t> sizes;
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
    if (sizes.empty()) sizes = {512, 2048, 8192};
    for (int64_t n : sizes) {
      for (DType t : {DType::BF16, DType::F32}) report("flash", n, t, time_attention(n, t));
    }
    ops::set_quantized_matmul(ops::QuantizedMatmul::Exact);
    report("fp32", sizes[0], DType::F32, time_attention(sizes[0], DType::F32));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corvid_attention_bench: %s\n", e.what());
    return 1;
  }
}
