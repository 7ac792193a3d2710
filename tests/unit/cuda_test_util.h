// Helpers shared by the CUDA tests: host <-> GPU copies of test tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/core/half.h"
#include "corvid/ops/ops.h"
#include "ops_test_util.h"

namespace corvid::testing {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU"

// The f16 weights the prompt GEMMs (Fast numerics: f16 operands for the block formats)
// use for a weight stored as `raw` (host, a GGUF dtype), as floats, row-major: the values
// rounded to f16, except Q4_K: a * q + z rounded once, with a = f16(d sc) and
// z = f16(-dmin mn) rounded first (ops/cuda/quant.cuh affine_quant_f16). q * a + z is
// exact in double; rounding it through float first can differ from a single rounding
// only in rare ties. The same holds for Q4_1, whose GPU layout Q4_1R computes d q + m
// with one f16 rounding where this rounds the F32 value again. Both far inside the GEMM
// tests' tolerance.
inline std::vector<float> prompt_gemm_weights_f16(const Tensor& raw) {
  std::vector<float> v = weight_values(raw);
  if (raw.dtype != DType::Q4_K) {
    for (float& x : v) x = f16_to_f32(f32_to_f16(x));
    return v;
  }
  const int64_t k = raw.cols();
  for (int64_t r = 0; r < raw.rows(); ++r) {
    const auto* row = static_cast<const uint8_t*>(raw.row(r));
    for (int64_t sb = 0; sb < k / 256; ++sb) {
      const uint8_t* b = row + sb * 144;  // d, dmin (f16), 12 bytes of 6-bit scales/minimums, 128 quant bytes
      const float d = f16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
      const float dmin = f16_to_f32(static_cast<uint16_t>(b[2] | (b[3] << 8)));
      const uint8_t* sm = b + 4;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, mn = 0;
        ops::cpu::unpack_scale_min_k4(sm, j, &sc, &mn);
        const double a = f16_to_f32(f32_to_f16(d * static_cast<float>(sc)));
        const double z = f16_to_f32(f32_to_f16(-(dmin * static_cast<float>(mn))));
        for (int l = 0; l < 32; ++l) {
          // Sub-block j: chunk j / 2 of 32 quant bytes, low nibbles for even j.
          const uint8_t byte = b[16 + 32 * (j / 2) + l];
          const int q = j % 2 == 0 ? (byte & 0xF) : (byte >> 4);
          v[static_cast<size_t>(r * k + sb * 256 + 32 * j + l)] =
              f16_to_f32(f32_to_f16(static_cast<float>(q * a + z)));
        }
      }
    }
  }
  return v;
}

// A GPU copy of a host tensor (same dtype and shape).
inline DeviceTensor to_gpu(const Tensor& host) {
  DeviceTensor d;
  d.buffer = DeviceBuffer(Device::CUDA, host.nbytes());
  d.tensor = host;
  d.tensor.device = Device::CUDA;
  d.tensor.data = d.buffer.data();
  copy_tensor(d.tensor, host);
  return d;
}

// A GPU copy of a host weight in dtype t: the same bytes, or for a GPU row layout
// (Q4_0R, Q4_1R, Q8_0R, Q4_KR) what ops::rearrange_weight makes of its GGUF type.
inline DeviceTensor weight_to_gpu(const Tensor& host, DType t) {
  DeviceTensor raw = to_gpu(host);
  if (host.dtype == t) return raw;
  DeviceTensor laid_out(Device::CUDA, t, {host.rows(), host.cols()});
  ops::rearrange_weight(raw.tensor, laid_out.tensor);
  return laid_out;
}

// The values of an F32 GPU tensor.
inline std::vector<float> to_host(const Tensor& dev) {
  std::vector<float> out(static_cast<size_t>(dev.numel()));
  Tensor h = dev;
  h.device = Device::CPU;
  h.data = out.data();
  copy_tensor(h, dev);
  return out;
}

// max |a - b| / max(max |b|, 1e-30); infinite when a holds a non-finite value.
inline double rel_err(const std::vector<float>& a, const float* b, size_t n) {
  double diff = 0, mag = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return diff / mag;
}

// Rounds host's F32 values to a KV cache `dtype` in place (nearest even; nothing for
// F32) and returns their 16-bit encodings (empty for F32).
inline std::vector<uint16_t> round_to_kv_dtype(const OwnedTensor& host, DType dtype) {
  if (dtype == DType::F32) return {};
  float* v = host.tensor.ptr<float>();
  const int64_t count = host.tensor.numel();
  std::vector<uint16_t> bits(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    bits[static_cast<size_t>(i)] = dtype == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    v[i] = dtype == DType::F16 ? f16_to_f32(bits[static_cast<size_t>(i)]) : bf16_to_f32(bits[static_cast<size_t>(i)]);
  }
  return bits;
}

// A GPU KV cache of `dtype` (F32, F16 or BF16) holding host's F32 values; for a 16-bit
// dtype host's values are first rounded to it in place, so a CPU reference over host
// reads exactly what the GPU cache holds.
inline DeviceTensor kv_to_gpu(const OwnedTensor& host, DType dtype) {
  if (dtype == DType::F32) return to_gpu(host.tensor);
  std::vector<uint16_t> bits = round_to_kv_dtype(host, dtype);
  Tensor staged = host.tensor;  // same shape
  staged.dtype = dtype;
  staged.data = bits.data();
  return to_gpu(staged);
}

// Sets the process-wide numerics for one scope (back to the default, Fast, after).
struct NumericsScope {
  explicit NumericsScope(ops::QuantizedMatmul mode) { ops::set_quantized_matmul(mode); }
  ~NumericsScope() { ops::set_quantized_matmul(ops::QuantizedMatmul::Fast); }
};

// ops::attention on the GPU against the CPU, on random q [positions, n_heads, head_dim]
// and a random K/V cache [cap, n_kv, head_dim] (seeds seed, seed + 1, seed + 2), scale
// 1/sqrt(head_dim): max |gpu - cpu| / max |cpu|. The GPU's cache is of kv_dtype (the
// CPU's holds the same values in F32: see kv_to_gpu).
inline double attention_gpu_vs_cpu(int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t cap,
                                   const std::vector<int32_t>& positions, int64_t window, uint32_t seed,
                                   DType kv_dtype = DType::F32) {
  const int64_t n = static_cast<int64_t>(positions.size());
  OwnedTensor q = f32_tensor({n, n_heads, head_dim}, random_floats(static_cast<size_t>(n * n_heads * head_dim), seed));
  OwnedTensor k = f32_tensor({cap, n_kv, head_dim}, random_floats(static_cast<size_t>(cap * n_kv * head_dim), seed + 1));
  OwnedTensor v = f32_tensor({cap, n_kv, head_dim}, random_floats(static_cast<size_t>(cap * n_kv * head_dim), seed + 2));
  DeviceTensor gq = to_gpu(q.tensor), gk = kv_to_gpu(k, kv_dtype), gv = kv_to_gpu(v, kv_dtype);
  OwnedTensor cpu_out(DType::F32, {n, n_heads, head_dim});
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  ops::attention(q.tensor, k.tensor, v.tensor, positions, scale, window, cpu_out.tensor);
  DeviceTensor g_out(Device::CUDA, DType::F32, {n, n_heads, head_dim});
  ops::attention(gq.tensor, gk.tensor, gv.tensor, positions, scale, window, g_out.tensor);
  const std::vector<float> got = to_host(g_out.tensor);
  return rel_err(got, cpu_out.ptr<float>(), got.size());
}

// Values of a and b that are not bit-for-bit equal (+1 when the sizes differ).
inline size_t mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  size_t bad = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) bad += !(a[i] == b[i]);
  return bad;
}

// The ops that produce a GEMM's input and may write it in the GEMM's form too (int8
// for a decode GEMV, the 16-bit operand for a prompt GEMM): cuda_fused_*_test.cc.
// AttentionShortCache: attention over a cache short enough for few splits.
enum class Producer { RmsNorm, AddRmsNorm, SiluMul, Attention, AttentionShortCache };

inline const char* producer_name(Producer p) {
  switch (p) {
    case Producer::RmsNorm: return "rms_norm";
    case Producer::AddRmsNorm: return "add_rms_norm";
    case Producer::SiluMul: return "silu_mul";
    case Producer::Attention: return "attention";
    case Producer::AttentionShortCache: return "attention (short cache)";
  }
  return "?";
}

}  // namespace corvid::testing
