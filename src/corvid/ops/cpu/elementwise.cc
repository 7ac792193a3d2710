// CPU elementwise and row-wise ops: embedding, rms_norm, rope, silu_mul, add,
// softmax. Each row is computed by the same code whatever the batch size, and
// rows are independent, so results are batch invariant and thread-count
// independent. Rows are split across the pool only when there is enough work
// to pay for the hand-off (decode-sized calls run on the caller).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/half.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/cpu/quants.h"
#include "corvid/ops/hadamard_signs.h"
#include "corvid/ops/kv_codec.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "corvid/ops/cpu/simd.h"
#endif

namespace corvid::ops::cpu {

namespace {

// Runs fn(r0, r1) over rows, threaded when rows * cols is large.
template <class Fn>
void for_rows(int64_t rows, int64_t cols, Fn fn) {
  constexpr int64_t kMinElemsPerChunk = 16384;
  const int64_t grain = std::max<int64_t>(1, kMinElemsPerChunk / std::max<int64_t>(1, cols));
  if (rows <= grain) {
    fn(0, rows);
    return;
  }
  ThreadPool::global().parallel_for(
      rows, [&](int64_t r0, int64_t r1, int) { fn(r0, r1); }, grain);
}

float load_float(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t k) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) dst[i] = load_float(t, src, i);
      return;
    default:
      quant_kernels(t).dequantize(src, dst, k);
  }
}

void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const int64_t d = table.cols();
  for_rows(static_cast<int64_t>(ids.size()), d, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      dequantize_row(table.dtype, table.row(ids[static_cast<size_t>(i)]), out.ptr<float>() + i * d, d);
    }
  });
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.ptr<float>() + r * cols;
      float* o = out.ptr<float>() + r * cols;
      // Sum of squares in double: exact enough that the order of the sum does not matter.
      double ss = 0;
      for (int64_t i = 0; i < cols; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
      if (weight.dtype == DType::F32) {
        const float* wf = weight.ptr<float>();
        for (int64_t i = 0; i < cols; ++i) o[i] = xr[i] * inv * wf[i];
      } else {
        for (int64_t i = 0; i < cols; ++i) o[i] = xr[i] * inv * load_float(weight.dtype, weight.data, i);
      }
    }
  });
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
  const int64_t cols = x.cols();
  const float* w = weight.ptr<float>();
  const float* b = bias.ptr<float>();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.ptr<float>() + r * cols;
      float* o = out.ptr<float>() + r * cols;
      // Mean, then the variance around it (two passes, in double: no cancellation).
      double sum = 0;
      for (int64_t i = 0; i < cols; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(cols);
      double ss = 0;
      for (int64_t i = 0; i < cols; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
      const float m = static_cast<float>(mean);
      for (int64_t i = 0; i < cols; ++i) o[i] = (xr[i] - m) * inv * w[i] + b[i];
    }
  });
}

// F32 rows copied, or encoded into a coded cache (ops/kv_codec.h: each head's head_dim
// values are whole groups); negative rows skipped.
void store_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> rows, const Tensor& k_cache,
              const Tensor& v_cache) {
  const int64_t row_elems = k.dim(1) * k.dim(2);
  auto put = [&](const Tensor& cache, const float* src, int32_t row) {
    const size_t row_bytes = bytes_for(cache.dtype, row_elems);
    auto* dst = static_cast<uint8_t*>(cache.data) + static_cast<size_t>(row) * row_bytes;
    if (cache.dtype != DType::F32) {
      kv_codec::encode(cache.dtype, src, row_elems, dst);
    } else {
      std::memcpy(dst, src, row_bytes);
    }
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0) continue;
    put(k_cache, k.ptr<float>() + static_cast<int64_t>(i) * row_elems, rows[i]);
    put(v_cache, v.ptr<float>() + static_cast<int64_t>(i) * row_elems, rows[i]);
  }
}

void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) {
  const int64_t n = x.dim(0), heads = x.dim(1), head_dim = x.dim(2);
  const int half = params.rotary_dim / 2;
  for_rows(n, heads * head_dim, [&](int64_t t0, int64_t t1) {
    // cos/sin of the last position seen on this thread: a decode step ropes q and then k at
    // the same position, so the second call (and every layer after the first) reuses them
    // instead of 2 * rotary_dim/2 double-precision cos/sin evaluations.
    thread_local std::vector<float> cs, cached_freq;
    thread_local int32_t cached_pos = 0;
    thread_local float cached_factor = 0;
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t p = positions[static_cast<size_t>(t)];
      if (cs.size() != static_cast<size_t>(2 * half) || p != cached_pos || cached_factor != params.attention_factor ||
          cached_freq != params.inv_freq) {
        cs.resize(static_cast<size_t>(2 * half));
        // theta = pos * inv_freq in float (the rounding the reference frameworks use), then
        // cos/sin evaluated accurately and scaled by attention_factor.
        const float pos = static_cast<float>(p);
        for (int i = 0; i < half; ++i) {
          const float theta = pos * params.inv_freq[static_cast<size_t>(i)];
          cs[static_cast<size_t>(2 * i)] =
              static_cast<float>(std::cos(static_cast<double>(theta))) * params.attention_factor;
          cs[static_cast<size_t>(2 * i + 1)] =
              static_cast<float>(std::sin(static_cast<double>(theta))) * params.attention_factor;
        }
        cached_pos = p;
        cached_factor = params.attention_factor;
        cached_freq = params.inv_freq;
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.ptr<float>() + (t * heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const float c = cs[static_cast<size_t>(2 * i)], s = cs[static_cast<size_t>(2 * i + 1)];
          const int a = params.interleaved ? 2 * i : i;
          const int b = params.interleaved ? 2 * i + 1 : i + half;
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x1 * c + x0 * s;
        }
      }
    }
  });
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t cols = gate.cols();
  for_rows(gate.rows(), cols, [&](int64_t r0, int64_t r1) {
    // Per row, so which elements take the SIMD body and which the scalar tail depends only on
    // the column (batch invariance), never on how rows were split.
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = gate.ptr<float>() + r * cols;
      const float* u = up.ptr<float>() + r * cols;
      float* o = out.ptr<float>() + r * cols;
      int64_t i = 0;
#if defined(__AVX2__)
      const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
      for (; i + 8 <= cols; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = simd::exp256(_mm256_xor_ps(gv, sign));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
      }
#endif
      for (; i < cols; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
}

void add(const Tensor& x, const Tensor& y) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    float* a = x.ptr<float>();
    const float* b = y.ptr<float>();
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) a[i] += b[i];
  });
}

// transformers' gelu_pytorch_tanh in float: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
static float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t cols = gate.cols();
  for_rows(gate.rows(), cols, [&](int64_t r0, int64_t r1) {
    const float* g = gate.ptr<float>();
    const float* u = up.ptr<float>();
    float* o = out.ptr<float>();
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) o[i] = gelu_tanh(g[i]) * u[i];
  });
}

void gelu(const Tensor& x) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    float* a = x.ptr<float>();
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) a[i] = 0.5f * a[i] * (1.0f + std::erf(a[i] * 0.70710678118654752f));
  });
}

void scale(const Tensor& x, float s) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    float* a = x.ptr<float>();
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) a[i] *= s;
  });
}

void gather_columns(const Tensor& x, int64_t offset, const Tensor& out) {
  const int64_t cols = out.cols(), width = x.cols();
  for_rows(out.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(out.ptr<float>() + r * cols, x.ptr<float>() + r * width + offset, static_cast<size_t>(cols) * 4);
  });
}

void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out) {
  const int64_t t_in = x.dim(0), channels = x.dim(1), cols = out.cols();
  for_rows(out.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      float* o = out.ptr<float>() + t * cols;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = t * stride + j - pad;
        const float* in = src >= 0 && src < t_in ? x.ptr<float>() + src * channels : nullptr;
        for (int64_t c = 0; c < channels; ++c) o[c * kernel + j] = in ? in[c] : 0.0f;
      }
    }
  });
}

// inverse: D H x / sqrt(d) (the butterflies first, the signs last), undoing H D x / sqrt(d).
void hadamard_rotate(const Tensor& x, bool inverse) {
  const int64_t d = x.dim(2), vectors = x.dim(0) * x.dim(1);
  const float norm = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t r = 0; r < vectors; ++r) {
    float* v = x.ptr<float>() + r * d;
    if (!inverse)
      for (int64_t i = 0; i < d; ++i) v[i] *= hadamard_sign(i);
    for (int64_t len = 1; len < d; len *= 2)  // in-place butterflies
      for (int64_t i = 0; i < d; i += 2 * len)
        for (int64_t j = i; j < i + len; ++j) {
          const float a = v[j], b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
    for (int64_t i = 0; i < d; ++i) v[i] = inverse ? v[i] * norm * hadamard_sign(i) : v[i] * norm;
  }
}

void softcap(const Tensor& x, float cap) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    float* a = x.ptr<float>();
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) a[i] = cap * std::tanh(a[i] / cap);
  });
}

void softmax(const Tensor& x) {
  const int64_t cols = x.cols();
  for_rows(x.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* v = x.ptr<float>() + r * cols;
      float mx = -INFINITY;
      for (int64_t i = 0; i < cols; ++i) mx = std::max(mx, v[i]);
      if (mx == -INFINITY) mx = 0;  // an all -inf row stays finite: exp(-inf) = 0 -> 0/0 avoided below
      double sum = 0;
      for (int64_t i = 0; i < cols; ++i) {
        v[i] = std::exp(v[i] - mx);
        sum += v[i];
      }
      const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
      for (int64_t i = 0; i < cols; ++i) v[i] *= inv;
    }
  });
}

}  // namespace corvid::ops::cpu
