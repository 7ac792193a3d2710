// Microbenchmark of the CPU ops at SmolLM2-135M shapes.
//
//   cmake -S . -B build -G Ninja -DCORVID_BENCH=ON && cmake --build build --target corvid_ops_bench
//   ./build/corvid_ops_bench --benchmark_min_time=0.2s [--benchmark_filter=Q4_1]
//
// matmul/<dtype>/<m>x<k>/n1/<ws>: decode-shaped matmul; reports GB/s of weight bytes.
//   ws=hot: one weight copy (stays in L2/L3 across iterations).
//   ws=128MB: copies cycled so ~128 MB of weights stream per pass, like one decode
//   step of the 135M model (~100 MB of weights) — the honest number for decode.
// matmul/<dtype>/<m>x<k>/n64: prefill-shaped; reports GFLOP/s (2*m*k*n per call).
// prefill/qwen2.5-0.5b/<dtype>/<m>x<k>/n512: the Qwen2.5-Coder-0.5B Q4_K_M prompt matmuls, GFLOP/s.
// copy/<bytes> and read/<bytes>: the machine's memcpy and streaming-read bandwidth on the
// same threads, for comparison (copy counts bytes copied once).
// decode_step/...: all matmuls of one SmolLM2-135M decode step (or prefill of 64 tokens).
//
// On a shared machine use --benchmark_repetitions=5 --benchmark_report_aggregates_only=true:
// the *_best_rate row holds the highest GB/s (and the longest time), the *_best_time row the
// shortest time (and the lowest rate): read each row for its own column.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/half.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/cpu/quants.h"
#include "corvid/ops/ops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace corvid {
namespace {

constexpr size_t kColdBytes = size_t{128} << 20;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

OwnedTensor make_weight(DType t, int64_t m, int64_t k) {
  OwnedTensor w(t, {m, k});
  std::vector<float> row(static_cast<size_t>(k));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (int64_t r = 0; r < m; ++r) {
    for (float& f : row) f = dist(rng);
    void* dst = w.tensor.row(r);
    switch (t) {
      case DType::F32:
        std::memcpy(dst, row.data(), row.size() * 4);
        break;
      case DType::F16:
        for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(row[static_cast<size_t>(i)]);
        break;
      case DType::BF16:
        for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(row[static_cast<size_t>(i)]);
        break;
      default:
        ops::cpu::quant_kernels(t).quantize(row.data(), dst, k);
    }
  }
  return w;
}

// Copies of one weight filling `ws_bytes` (at least one).
std::vector<OwnedTensor> weight_set(DType t, int64_t m, int64_t k, size_t ws_bytes) {
  std::vector<OwnedTensor> set;
  set.push_back(make_weight(t, m, k));
  const size_t one = set[0].tensor.nbytes();
  while (set.size() * one < ws_bytes) {
    OwnedTensor c(t, {m, k});
    std::memcpy(c.tensor.data, set[0].tensor.data, one);
    set.push_back(std::move(c));
  }
  return set;
}

// The benchmark body runs several times while the library sizes the iteration count;
// keep the last weight set instead of re-quantizing it each time.
const std::vector<OwnedTensor>& cached_weight_set(DType t, int64_t m, int64_t k, size_t ws_bytes) {
  static std::vector<OwnedTensor> set;
  static DType st = DType::F32;
  static int64_t sm = -1, sk = -1;
  static size_t sws = 0;
  if (t != st || m != sm || k != sk || ws_bytes != sws) {
    set.clear();
    set = weight_set(t, m, k, ws_bytes);
    st = t, sm = m, sk = k, sws = ws_bytes;
  }
  return set;
}

void bm_matmul(benchmark::State& st, DType t, int64_t m, int64_t k, int64_t n, size_t ws_bytes) {
  const auto& set = cached_weight_set(t, m, k, ws_bytes);
  OwnedTensor x(DType::F32, {n, k});
  const auto xs = random_floats(static_cast<size_t>(n * k), 1);
  std::memcpy(x.tensor.data, xs.data(), xs.size() * 4);
  OwnedTensor out(DType::F32, {n, m});
  size_t i = 0;
  for (auto _ : st) {
    ops::matmul(x.tensor, set[i].tensor, out.tensor);
    benchmark::DoNotOptimize(out.tensor.data);
    if (++i == set.size()) i = 0;
  }
  const double iters = static_cast<double>(st.iterations());
  if (n == 1) {
    st.counters["GB/s"] =
        benchmark::Counter(iters * static_cast<double>(set[0].tensor.nbytes()) / 1e9, benchmark::Counter::kIsRate);
  } else {
    st.counters["GFLOP/s"] =
        benchmark::Counter(iters * 2.0 * static_cast<double>(m * k * n) / 1e9, benchmark::Counter::kIsRate);
  }
}

// Bandwidth references: memcpy and a streaming read, split over the pool's threads.
void bm_copy(benchmark::State& st, size_t bytes) {
  Buffer src(bytes), dst(bytes);
  std::memset(src.data(), 1, bytes);
  for (auto _ : st) {
    ThreadPool::global().parallel_for(
        static_cast<int64_t>(bytes >> 16),
        [&](int64_t b0, int64_t b1, int) {
          std::memcpy(dst.as<char>() + (b0 << 16), src.as<char>() + (b0 << 16), static_cast<size_t>(b1 - b0) << 16);
        },
        16);
    benchmark::DoNotOptimize(dst.data());
  }
  st.counters["GB/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * static_cast<double>(bytes) / 1e9,
                                           benchmark::Counter::kIsRate);
}

void bm_read(benchmark::State& st, size_t bytes) {
  Buffer src(bytes);
  std::memset(src.data(), 1, bytes);
  for (auto _ : st) {
    std::vector<uint64_t> sums(16, 0);
    ThreadPool::global().parallel_for(
        static_cast<int64_t>(bytes >> 16),
        [&](int64_t b0, int64_t b1, int tid) {
          const char* p = src.as<char>() + (b0 << 16);
          const char* e = src.as<char>() + (b1 << 16);
#if defined(__AVX2__)
          __m256i a0 = _mm256_setzero_si256(), a1 = a0;
          for (; p < e; p += 64) {
            a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
            a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
          }
          sums[static_cast<size_t>(tid)] += static_cast<uint64_t>(_mm256_extract_epi64(_mm256_add_epi64(a0, a1), 0));
#else
          uint64_t s = 0;
          for (; p < e; p += 8) {
            uint64_t v;
            std::memcpy(&v, p, 8);
            s += v;
          }
          sums[static_cast<size_t>(tid)] += s;
#endif
        },
        16);
    benchmark::DoNotOptimize(sums.data());
  }
  st.counters["GB/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * static_cast<double>(bytes) / 1e9,
                                           benchmark::Counter::kIsRate);
}

// The matmuls of one SmolLM2-135M decode step (30 layers of q,k,v,o,gate,up,down in
// Q4_1 plus the tied Q8_0 output head): the weight traffic a real decode sees.
void bm_decode_step(benchmark::State& st, int64_t n) {
  struct Layer {
    OwnedTensor q, k, v, o, gate, up, down;
  };
  static std::vector<Layer> layers;
  static OwnedTensor head;
  if (layers.empty()) {
    for (int l = 0; l < 30; ++l) {
      layers.push_back({make_weight(DType::Q4_1, 576, 576), make_weight(DType::Q4_1, 192, 576),
                        make_weight(DType::Q4_1, 192, 576), make_weight(DType::Q4_1, 576, 576),
                        make_weight(DType::Q4_1, 1536, 576), make_weight(DType::Q4_1, 1536, 576),
                        make_weight(DType::Q4_1, 576, 1536)});
    }
    head = make_weight(DType::Q8_0, 49152, 576);
  }
  OwnedTensor x(DType::F32, {n, 576}), x2(DType::F32, {n, 1536}), y(DType::F32, {n, 1536}),
      logits(DType::F32, {n, 49152});
  const auto xs = random_floats(static_cast<size_t>(n * 1536), 3);
  std::memcpy(x.tensor.data, xs.data(), static_cast<size_t>(n * 576) * 4);
  std::memcpy(x2.tensor.data, xs.data(), static_cast<size_t>(n * 1536) * 4);
  double bytes = static_cast<double>(head.tensor.nbytes());
  for (const Layer& L : layers) {
    for (const OwnedTensor* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
      bytes += static_cast<double>(w->tensor.nbytes());
  }
  for (auto _ : st) {
    for (const Layer& L : layers) {
      for (const OwnedTensor* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up}) {
        Tensor out(DType::F32, {n, w->tensor.dim(0)}, y.tensor.data);
        ops::matmul(x.tensor, w->tensor, out);
      }
      Tensor out(DType::F32, {n, 576}, y.tensor.data);
      ops::matmul(x2.tensor, L.down.tensor, out);
    }
    ops::matmul(x.tensor, head.tensor, logits.tensor);
    benchmark::DoNotOptimize(logits.tensor.data);
  }
  const double iters = static_cast<double>(st.iterations());
  st.counters["GB/s"] = benchmark::Counter(iters * bytes / 1e9, benchmark::Counter::kIsRate);
  st.counters["tok/s"] = benchmark::Counter(iters * static_cast<double>(n), benchmark::Counter::kIsRate);
}

struct Shape {
  int64_t m, k;
};

// With --benchmark_repetitions=N, "best" reports the fastest repetition (min time, max rate):
// on a shared machine the best run is the one least disturbed by other processes.
benchmark::internal::Benchmark* with_best(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()
      ->ComputeStatistics("best_time",
                          [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
      ->ComputeStatistics("best_rate",
                          [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
}

void register_all() {
  const DType types[] = {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                         DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16, DType::F32};
  const Shape shapes[] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  for (DType t : types) {
    for (Shape s : shapes) {
      if (s.k % dtype_info(t).block_elems != 0) continue;  // K-quants need k % 256 == 0
      const std::string base =
          "matmul/" + std::string(dtype_name(t)) + "/" + std::to_string(s.m) + "x" + std::to_string(s.k);
      with_best(
          benchmark::RegisterBenchmark((base + "/n1/hot").c_str(), bm_matmul, t, s.m, s.k, int64_t{1}, size_t{0}));
      with_best(
          benchmark::RegisterBenchmark((base + "/n1/128MB").c_str(), bm_matmul, t, s.m, s.k, int64_t{1}, kColdBytes));
      with_best(benchmark::RegisterBenchmark((base + "/n64").c_str(), bm_matmul, t, s.m, s.k, int64_t{64}, size_t{0}));
    }
  }
  // The prompt matmuls of Qwen2.5-Coder-0.5B-Instruct Q4_K_M (issue 25): each block type at the
  // shapes where that file uses it, 512 tokens (pp512's batch).
  struct Typed {
    DType t;
    Shape s;
  };
  const Typed qwen[] = {{DType::Q5_0, {4864, 896}}, {DType::Q5_0, {896, 896}}, {DType::Q8_0, {128, 896}},
                        {DType::Q4_K, {896, 4864}}, {DType::Q6_K, {896, 4864}}};
  for (const Typed& q : qwen) {
    const std::string name = "prefill/qwen2.5-0.5b/" + std::string(dtype_name(q.t)) + "/" + std::to_string(q.s.m) +
                             "x" + std::to_string(q.s.k) + "/n512";
    with_best(benchmark::RegisterBenchmark(name.c_str(), bm_matmul, q.t, q.s.m, q.s.k, int64_t{512}, size_t{0}));
  }
  with_best(benchmark::RegisterBenchmark("decode_step/smollm2_135m_q4_1/n1", bm_decode_step, int64_t{1}));
  with_best(benchmark::RegisterBenchmark("decode_step/smollm2_135m_q4_1/n64", bm_decode_step, int64_t{64}));
  for (size_t mb : {32, 128}) {
    with_best(benchmark::RegisterBenchmark(("copy/" + std::to_string(mb) + "MB").c_str(), bm_copy, mb << 20));
    with_best(benchmark::RegisterBenchmark(("read/" + std::to_string(mb) + "MB").c_str(), bm_read, mb << 20));
  }
}

}  // namespace
}  // namespace corvid

int main(int argc, char** argv) {
  // --threads=N sizes the ops thread pool (default: all hardware threads). With
  // --threads=1 on a busy machine, the CPU-time column is the kernel's cost.
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      corvid::ThreadPool::set_global_threads(std::atoi(argv[i] + 10));
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  corvid::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
