// Decode GEMV on the GPU at the Llama-3.1-8B shapes, against the copy bandwidth
// measured in the same run.
//
//   cmake -S . -B build-cuda -G Ninja -DCORVID_CUDA=ON -DCORVID_BENCH=ON && cmake --build build-cuda --target corvid_gemv_bench
//   ./build-cuda/corvid_gemv_bench [DTYPE ...]        # default: BF16 F16 Q8_0 Q4_0 Q4_1 Q4_K Q6_K
//   ./build-cuda/corvid_gemv_bench --prefill N [DTYPE ...]   # the same shapes as N-token prefill matmuls
//
// Each GEMV (n = 1, F32 activations) is timed with CUDA events over many calls that
// cycle through several copies of the weight (together over 4x the L2), so every call
// reads its weight from HBM. GB/s counts weight bytes only; the copy ceiling counts
// bytes read plus bytes written (a 1 GiB device-to-device cudaMemcpy). Both the tiled
// kernels and the general one-warp-per-row kernels are timed, and their outputs
// compared. The last column estimates decode tok/s from the GEMVs alone (32 layers of
// q, k, v, o, gate, up, down plus the output projection).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "corvid/core/dtype.h"
#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/core/tensor.h"
#include "corvid/ops/cpu/quants.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/ops.h"
#include "cuda_timing.h"

namespace corvid {
namespace {

using ops::cuda::context;

struct Shape {
  int64_t m, k;
  const char* name;
  int per_token;  // how many times one decode token runs this GEMV (32 layers)
};

// As the model runs them: q|k|v and gate|up fused into one matrix each (LlamaModel).
constexpr Shape kShapes[] = {{6144, 4096, "qkv", 32},       {4096, 4096, "o", 32},
                             {28672, 4096, "gate_up", 32},  {4096, 14336, "down", 32},
                             {128256, 4096, "lm_head", 1}};

using bench::time_calls;

double copy_bandwidth_gbs() {
  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&src, bytes));
  CORVID_CUDA_CHECK(cudaMalloc(&dst, bytes));
  CORVID_CUDA_CHECK(cudaMemset(src, 0x5A, bytes));
  const double us = time_calls(20, [&](int) {
    CORVID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, context().stream));
  });
  CORVID_CUDA_CHECK(cudaFree(src));
  CORVID_CUDA_CHECK(cudaFree(dst));
  return 2.0 * static_cast<double>(bytes) / (us * 1e3);  // read + write
}

// kPatternRows distinct random rows in dtype t, repeated to fill m rows on the device
// (a GPU row layout: quantized in its GGUF dtype, then rearranged as at upload).
constexpr int64_t kPatternRows = 64;
void fill_weight(DType t, int64_t m, int64_t k, uint8_t* dev) {
  const DType stored = ops::stored_weight_dtype(t);
  if (stored != t) {
    uint8_t* raw = nullptr;
    CORVID_CUDA_CHECK(cudaMalloc(&raw, bytes_for(stored, k) * static_cast<size_t>(m)));
    fill_weight(stored, m, k, raw);
    ops::cuda::rearrange_weight(Tensor(stored, {m, k}, raw, Device::CUDA), Tensor(t, {m, k}, dev, Device::CUDA));
    CORVID_CUDA_CHECK(cudaDeviceSynchronize());
    CORVID_CUDA_CHECK(cudaFree(raw));
    return;
  }
  const size_t row_bytes = bytes_for(t, k);
  std::vector<uint8_t> host(row_bytes * kPatternRows);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < kPatternRows; ++r) {
    for (float& f : row) f = dist(rng);
    uint8_t* dst = host.data() + r * row_bytes;
    if (t == DType::BF16) {
      for (int64_t i = 0; i < k; ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(row[i]);
    } else if (t == DType::F16) {
      for (int64_t i = 0; i < k; ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(row[i]);
    } else {
      ops::cpu::quant_kernels(t).quantize(row.data(), dst, k);
    }
  }
  const int64_t first = std::min(m, kPatternRows);
  CORVID_CUDA_CHECK(cudaMemcpy(dev, host.data(), row_bytes * first, cudaMemcpyHostToDevice));
  for (int64_t filled = first; filled < m;) {  // doubling copies
    const int64_t n = std::min(filled, m - filled);
    CORVID_CUDA_CHECK(cudaMemcpy(dev + filled * row_bytes, dev, n * row_bytes, cudaMemcpyDeviceToDevice));
    filled += n;
  }
}

struct Result {
  double persistent_us = 0, tiled_us = 0, general_us = 0, diff = 0;
  double auto_us = 0, auto_diff = 0;  // Auto in the default (Fast) numerics: dp4a for block formats
};

Result bench_one(DType t, const Shape& s, size_t l2_bytes) {
  const size_t bytes = bytes_for(t, s.k) * static_cast<size_t>(s.m);
  const int copies = static_cast<int>(std::max<size_t>(1, (4 * l2_bytes + bytes - 1) / bytes));
  uint8_t* w = nullptr;
  float *x = nullptr, *out = nullptr, *out_general = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&w, bytes * copies));
  CORVID_CUDA_CHECK(cudaMalloc(&x, s.k * sizeof(float)));
  CORVID_CUDA_CHECK(cudaMalloc(&out, s.m * sizeof(float)));
  CORVID_CUDA_CHECK(cudaMalloc(&out_general, s.m * sizeof(float)));
  fill_weight(t, s.m, s.k, w);
  for (int c = 1; c < copies; ++c) CORVID_CUDA_CHECK(cudaMemcpy(w + c * bytes, w, bytes, cudaMemcpyDeviceToDevice));
  std::vector<float> xh(static_cast<size_t>(s.k));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& f : xh) f = dist(rng);
  CORVID_CUDA_CHECK(cudaMemcpy(x, xh.data(), xh.size() * sizeof(float), cudaMemcpyHostToDevice));
  CORVID_CUDA_CHECK(cudaMemset(out, 0xFF, s.m * sizeof(float)));  // NaN until written
  CORVID_CUDA_CHECK(cudaMemset(out_general, 0xFF, s.m * sizeof(float)));
  float* out_tiled = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&out_tiled, s.m * sizeof(float)));
  CORVID_CUDA_CHECK(cudaMemset(out_tiled, 0xFF, s.m * sizeof(float)));

  const Tensor xt(DType::F32, {1, s.k}, x, Device::CUDA);
  auto call = [&](int i, float* o) {
    const Tensor wt(t, {s.m, s.k}, w + static_cast<size_t>(i % copies) * bytes, Device::CUDA);
    const Tensor ot(DType::F32, {1, s.m}, o, Device::CUDA);
    ops::cuda::matmul(xt, wt, ot, nullptr);
  };
  const int calls = static_cast<int>(std::clamp<double>(16e9 / static_cast<double>(bytes), 40, 4000));
  Result r;
  using ops::cuda::GemvKernels;
  ops::cuda::set_gemv_kernels(GemvKernels::Persistent);
  r.persistent_us = time_calls(calls, [&](int i) { call(i, out); });
  ops::cuda::set_gemv_kernels(GemvKernels::Tiled);
  r.tiled_us = time_calls(calls, [&](int i) { call(i, out_tiled); });
  ops::cuda::set_gemv_kernels(GemvKernels::General);
  // The general kernels are slow on some formats: fewer calls.
  r.general_us = time_calls(std::max(10, calls / 4), [&](int i) { call(i, out_general); });
  ops::cuda::set_gemv_kernels(GemvKernels::Auto);
  float* out_auto = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&out_auto, s.m * sizeof(float)));
  CORVID_CUDA_CHECK(cudaMemset(out_auto, 0xFF, s.m * sizeof(float)));
  r.auto_us = time_calls(calls, [&](int i) { call(i, out_auto); });
  std::vector<float> d(static_cast<size_t>(s.m));
  CORVID_CUDA_CHECK(cudaMemcpy(d.data(), out_auto, s.m * sizeof(float), cudaMemcpyDeviceToHost));
  CORVID_CUDA_CHECK(cudaFree(out_auto));
  std::vector<float> a(static_cast<size_t>(s.m)), b(static_cast<size_t>(s.m)), c(static_cast<size_t>(s.m));
  CORVID_CUDA_CHECK(cudaMemcpy(a.data(), out, s.m * sizeof(float), cudaMemcpyDeviceToHost));
  CORVID_CUDA_CHECK(cudaMemcpy(b.data(), out_general, s.m * sizeof(float), cudaMemcpyDeviceToHost));
  CORVID_CUDA_CHECK(cudaMemcpy(c.data(), out_tiled, s.m * sizeof(float), cudaMemcpyDeviceToHost));
  double diff = 0, mag = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]) || !std::isfinite(c[i])) diff = INFINITY;
    diff = std::max({diff, static_cast<double>(std::abs(a[i] - b[i])), static_cast<double>(std::abs(c[i] - b[i]))});
    mag = std::max(mag, static_cast<double>(std::abs(b[i])));
  }
  r.diff = diff / mag;
  double auto_diff = 0;
  for (size_t i = 0; i < d.size(); ++i)
    auto_diff = std::isfinite(d[i]) ? std::max(auto_diff, static_cast<double>(std::abs(d[i] - b[i]))) : INFINITY;
  r.auto_diff = auto_diff / mag;
  CORVID_CUDA_CHECK(cudaFree(out_tiled));
  CORVID_CUDA_CHECK(cudaFree(w));
  CORVID_CUDA_CHECK(cudaFree(x));
  CORVID_CUDA_CHECK(cudaFree(out));
  CORVID_CUDA_CHECK(cudaFree(out_general));
  return r;
}

// Prefill-shaped matmul (n tokens at once: the tensor-core path, dequantizing block
// formats to bf16 tiles for cuBLAS) on one copy of the weight; microseconds per call.
double bench_prefill(DType t, const Shape& s, int64_t n) {
  const size_t bytes = bytes_for(t, s.k) * static_cast<size_t>(s.m);
  uint8_t* w = nullptr;
  float *x = nullptr, *out = nullptr;
  CORVID_CUDA_CHECK(cudaMalloc(&w, bytes));
  CORVID_CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(n * s.k) * sizeof(float)));
  CORVID_CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(n * s.m) * sizeof(float)));
  fill_weight(t, s.m, s.k, w);
  std::vector<float> xh(static_cast<size_t>(n * s.k));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& f : xh) f = dist(rng);
  CORVID_CUDA_CHECK(cudaMemcpy(x, xh.data(), xh.size() * sizeof(float), cudaMemcpyHostToDevice));
  const Tensor xt(DType::F32, {n, s.k}, x, Device::CUDA), wt(t, {s.m, s.k}, w, Device::CUDA),
      ot(DType::F32, {n, s.m}, out, Device::CUDA);
  const double us = time_calls(20, [&](int) { ops::cuda::matmul(xt, wt, ot, nullptr); });
  CORVID_CUDA_CHECK(cudaFree(w));
  CORVID_CUDA_CHECK(cudaFree(x));
  CORVID_CUDA_CHECK(cudaFree(out));
  return us;
}

void run_prefill(const std::vector<DType>& dtypes, int64_t n) {
  std::printf("prefill matmul, n = %lld tokens (the output projection is left out: prefill computes it for the last "
              "token only)\n",
              static_cast<long long>(n));
  std::printf("%-5s %-8s %6s %6s | %9s %8s\n", "dtype", "matrix", "m", "k", "us", "TFLOP/s");
  for (DType t : dtypes) {
    double token_us = 0, flops = 0;
    for (const Shape& s : kShapes) {
      if (s.per_token == 1) continue;
      const double us = bench_prefill(t, s, n);
      const double f = 2.0 * static_cast<double>(n) * static_cast<double>(s.m) * static_cast<double>(s.k);
      std::printf("%-5s %-8s %6lld %6lld | %9.1f %8.1f\n", std::string(dtype_name(t)).c_str(), s.name,
                  static_cast<long long>(s.m), static_cast<long long>(s.k), us, f / (us * 1e6));
      token_us += us * s.per_token / static_cast<double>(n);
      flops += f * s.per_token;
    }
    std::printf("%-5s per prompt token: %.2f us of matmuls (%.0f TFLOP/s)\n\n", std::string(dtype_name(t)).c_str(),
                token_us, flops / (token_us * static_cast<double>(n) * 1e6));
  }
}

DType dtype_named(const std::string& name) {
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K,
                  DType::F32, DType::Q5_0, DType::Q5_1, DType::Q5_K, DType::Q4_0R, DType::Q4_1R, DType::Q8_0R,
                  DType::Q4_KR})
    if (dtype_name(t) == name) return t;
  fail("gemv_bench: unknown dtype '", name, "'");
}

int run(int argc, char** argv) {
  std::vector<DType> dtypes;
  int64_t prefill_tokens = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--prefill" && i + 1 < argc) prefill_tokens = std::atoll(argv[++i]);
    else dtypes.push_back(dtype_named(argv[i]));
  }
  if (prefill_tokens > 0) {
    if (dtypes.empty()) dtypes = {DType::BF16, DType::Q8_0R, DType::Q4_0R, DType::Q4_KR, DType::Q6_K};
    context();
    run_prefill(dtypes, prefill_tokens);
    return 0;
  }
  if (dtypes.empty())
    dtypes = {DType::BF16, DType::F16,  DType::Q8_0,  DType::Q8_0R, DType::Q4_0,
              DType::Q4_0R, DType::Q4_1, DType::Q4_1R, DType::Q4_K,  DType::Q4_KR, DType::Q6_K};
  context();
  cudaDeviceProp p{};
  CORVID_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  const double copy = copy_bandwidth_gbs();
  std::printf("copy bandwidth (D2D cudaMemcpy 1 GiB, read+write): %.0f GB/s\n\n", copy);
  std::printf("persistent: tiled kernels, grid = blocks resident at once; tiled: one block per 4-row group;\n"
              "general: the one-warp-per-row kernels (before this work); rel diff: max |other - general| / max |general|\n");
  std::printf("auto: the default kernels in the default (Fast) numerics: int8 activations with dp4a for the\n"
              "block formats (gemv_dp4a.cu; CORVID_NO_DP4A=1 turns it off), its reldiff against general\n");
  std::printf("%-5s %-8s %6s %6s %7s | %7s %6s %6s | %7s %6s | %7s %6s | %7s | %7s %6s %7s\n", "dtype", "matrix", "m",
              "k", "MB", "pers us", "GB/s", "%copy", "tile us", "GB/s", "gen us", "GB/s", "reldiff", "auto us", "GB/s",
              "reldiff");
  for (DType t : dtypes) {
    double token_us = 0, token_us_tiled = 0, token_us_old = 0, token_us_auto = 0, token_bytes = 0;
    for (const Shape& s : kShapes) {
      const Result r = bench_one(t, s, static_cast<size_t>(p.l2CacheSize));
      const double bytes = static_cast<double>(bytes_for(t, s.k)) * s.m;
      const double gbs = bytes / (r.persistent_us * 1e3);
      std::printf("%-5s %-8s %6lld %6lld %7.1f | %7.1f %6.0f %5.1f%% | %7.1f %6.0f | %7.1f %6.0f | %7.1e | %7.1f %6.0f "
                  "%7.1e\n",
                  std::string(dtype_name(t)).c_str(), s.name, static_cast<long long>(s.m),
                  static_cast<long long>(s.k), bytes / 1e6, r.persistent_us, gbs, 100 * gbs / copy, r.tiled_us,
                  bytes / (r.tiled_us * 1e3), r.general_us, bytes / (r.general_us * 1e3), r.diff, r.auto_us,
                  bytes / (r.auto_us * 1e3), r.auto_diff);
      token_us_auto += r.auto_us * s.per_token;
      token_us += r.persistent_us * s.per_token;
      token_us_tiled += r.tiled_us * s.per_token;
      token_us_old += r.general_us * s.per_token;
      token_bytes += bytes * s.per_token;
    }
    std::printf("%-5s per token: %.2f GB of GEMV weights, %.0f us -> %.0f tok/s GEMV-only (%.0f GB/s, %.1f%% of copy); "
                "tiled %.0f, general %.0f, auto %.0f tok/s\n\n",
                std::string(dtype_name(t)).c_str(), token_bytes / 1e9, token_us, 1e6 / token_us,
                token_bytes / (token_us * 1e3), 100 * token_bytes / (token_us * 1e3) / copy, 1e6 / token_us_tiled,
                1e6 / token_us_old, 1e6 / token_us_auto);
  }
  return 0;
}

}  // namespace
}  // namespace corvid

int main(int argc, char** argv) {
  try {
    return corvid::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemv_bench: %s\n", e.what());
    return 1;
  }
}
