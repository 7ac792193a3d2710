// Helpers shared by the ops tests: seeded random data and float-type weight builders.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/half.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// A weight tensor [m, k] of dtype t made from float data (quantized or converted).
inline OwnedTensor make_weight(DType t, int64_t m, int64_t k, const std::vector<float>& src) {
  OwnedTensor w(t, {m, k});
  for (int64_t r = 0; r < m; ++r) {
    const float* s = src.data() + r * k;
    void* dst = w.tensor.row(r);
    switch (t) {
      case DType::F32:
        std::memcpy(dst, s, static_cast<size_t>(k) * 4);
        break;
      case DType::F16:
        for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(s[i]);
        break;
      case DType::BF16:
        for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(s[i]);
        break;
      default:
        ops::cpu::quant_kernels(t).quantize(s, dst, k);
    }
  }
  return w;
}

// The weight's values as the kernels see them (dequantized), row-major [m, k].
inline std::vector<float> weight_values(const Tensor& w) {
  std::vector<float> v(static_cast<size_t>(w.numel()));
  for (int64_t r = 0; r < w.rows(); ++r) ops::cpu::dequantize_row(w.dtype, w.row(r), v.data() + r * w.cols(), w.cols());
  return v;
}

inline OwnedTensor f32_tensor(std::initializer_list<int64_t> dims, const std::vector<float>& values) {
  OwnedTensor t(DType::F32, dims);
  std::memcpy(t.tensor.data, values.data(), values.size() * sizeof(float));
  return t;
}

inline bool bitwise_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace corvid::testing
