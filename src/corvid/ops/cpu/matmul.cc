// CPU matmul: out[n, m] = x[n, k] @ w[m, k]^T (+ bias), w in any weight dtype.
//
// Every output element is one evaluation of the row dot kernel on (weight row r,
// activation row t): the single-row VecDotFn, or its bit-identical many-row form
// (GemmFn), whose lanes run the same arithmetic. That single rule gives determinism for
// free: the result cannot depend on the thread count, on how rows are split, or on n
// (batch invariance: row t of matmul(x) equals matmul(x[t:t+1]) bit for bit), because
// the arithmetic of each element never changes. Activation rows are quantized one at a
// time by the same function, so they do not depend on n either.
//
// Performance notes.
// - Block formats with AVX-512 VNNI (RowDot::gemm): panels of 16 weight rows are split
//   across the pool; each is unpacked once into lanes (one row per 32-bit lane) and
//   multiplied with all n tokens, so prefill runs at integer-dot rates (gemm_q_avx512.cc
//   for the 32-element formats at every n, gemm_k_avx512.cc for the K-quants from 8 tokens;
//   below that their single-row kernel is as fast).
// - Otherwise rows are processed in tiles of kRowTile; for each tile all n activation
//   rows are visited while the tile's weight bytes sit in L1, so the weight is read from
//   memory once per call instead of once per token. n = 1 (decode) is a stream over the
//   weight: memory bound, each thread streaming its own contiguous range.
// - On an oversubscribed machine (other processes busy on every core) a worker that is
//   preempted while holding a chunk stalls the call until it runs again; measured on the
//   2-core dev box during parallel builds, the worker got ~10% of the chunks and one thread
//   (ThreadPool::set_global_threads(1)) decoded faster than two. On a quiet machine two
//   threads win. The pool's caller never waits for a worker that has not claimed work.
// - Quantized weights: x rows are quantized once per call to the activation
//   format (Q8_0/Q8_1/Q8_K) into a grow-only thread-local scratch buffer (no
//   allocation in steady state).
#include <algorithm>
#include <atomic>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/cpu/float_dot.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

namespace {

std::atomic<bool> g_force_scalar{false};
std::atomic<QuantizedMatmul> g_quantized_mode{QuantizedMatmul::Fast};

constexpr int64_t kRowTile = 8;

struct RowDot {
  VecDotFn fn;
  DType act;            // format of the activation rows fn reads (F32 for float weights)
  GemmFn gemm;          // all activation rows at once, bit-identical to fn; may be null
  int64_t gemm_min_tokens;
};

constexpr int64_t kGemmPanelRows = 16;

RowDot row_dot_for(DType w) {
  const bool scalar = g_force_scalar.load(std::memory_order_relaxed);
  auto pick = [scalar](VecDotFn simd_fn, VecDotFn scalar_fn) { return scalar || !simd_fn ? scalar_fn : simd_fn; };
  switch (w) {
    case DType::F32:
      return {pick(kDotF32Simd, dot_f32_scalar), DType::F32, nullptr, 0};
    case DType::F16:
      return {pick(kDotF16Simd, dot_f16_scalar), DType::F32, nullptr, 0};
    case DType::BF16:
      return {pick(kDotBF16Simd, dot_bf16_scalar), DType::F32, nullptr, 0};
    default: {
      const QuantKernels& q = quant_kernels(w);
      CORVID_CHECK(q.vec_dot != nullptr, "matmul: ", dtype_name(w), " is an activation format, not a weight dtype");
      return {scalar ? q.vec_dot_scalar : q.vec_dot, q.act, scalar ? nullptr : q.gemm, q.gemm_min_tokens};
    }
  }
}

float bias_at(const Tensor* bias, int64_t r) {
  switch (bias->dtype) {
    case DType::F16:
      return f16_to_f32(bias->ptr<uint16_t>()[r]);
    case DType::BF16:
      return bf16_to_f32(bias->ptr<uint16_t>()[r]);
    default:
      return bias->ptr<float>()[r];
  }
}

std::vector<uint8_t>& scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}

}  // namespace

void set_force_scalar(bool on) { g_force_scalar.store(on); }

// QuantizedMatmul::Exact: each weight row is dequantized once per call into a thread-local
// buffer and dotted with the F32 activation rows by the F32 kernel. Like the fast path,
// every element is one evaluation of one kernel, so it is batch invariant too.
static void matmul_exact(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias, ThreadPool& pool) {
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  const VecDotFn dot = g_force_scalar.load() || !kDotF32Simd ? dot_f32_scalar : kDotF32Simd;
  const uint8_t* wbase = static_cast<const uint8_t*>(w.data);
  const size_t w_stride = w.row_bytes();
  const float* xf = x.ptr<float>();
  float* o = out.ptr<float>();
  pool.parallel_for(m, [&](int64_t r0, int64_t r1, int) {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(k)) row.resize(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.dtype, wbase + static_cast<size_t>(r) * w_stride, row.data(), k);
      for (int64_t t = 0; t < n; ++t) {
        const float v = dot(row.data(), xf + t * k, k);
        o[t * m + r] = bias ? v + bias_at(bias, r) : v;
      }
    }
  }, kRowTile);
}

void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias) {
  matmul(x, w, out, bias, ThreadPool::global());
}

void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias, ThreadPool& pool) {
  if (is_quantized(w.dtype) && g_quantized_mode.load(std::memory_order_relaxed) == QuantizedMatmul::Exact) {
    matmul_exact(x, w, out, bias, pool);
    return;
  }
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  const RowDot rd = row_dot_for(w.dtype);

  // Activation rows in the format the dot kernel reads.
  const uint8_t* xa = static_cast<const uint8_t*>(x.data);
  size_t xa_stride = static_cast<size_t>(k) * sizeof(float);
  if (rd.act != DType::F32) {
    const QuantKernels& qa = quant_kernels(rd.act);
    xa_stride = bytes_for(rd.act, k);
    std::vector<uint8_t>& buf = scratch();
    if (buf.size() < xa_stride * static_cast<size_t>(n)) buf.resize(xa_stride * static_cast<size_t>(n));
    uint8_t* dst = buf.data();
    const float* xf = x.ptr<float>();
    auto quantize = [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        qa.quantize(xf + t * k, dst + static_cast<size_t>(t) * xa_stride, k);
      }
    };
    if (n >= 8) {
      pool.parallel_for(n, quantize, 4);
    } else {
      quantize(0, n, 0);
    }
    xa = dst;
  }

  const uint8_t* wbase = static_cast<const uint8_t*>(w.data);
  const size_t w_stride = w.row_bytes();
  float* o = out.ptr<float>();
  if (rd.gemm && n >= rd.gemm_min_tokens) {
    const int64_t panels = (m + kGemmPanelRows - 1) / kGemmPanelRows;
    pool.parallel_for(panels, [&](int64_t p0, int64_t p1, int) {
      const int64_t r0 = p0 * kGemmPanelRows, r1 = std::min(m, p1 * kGemmPanelRows);
      rd.gemm(wbase + static_cast<size_t>(r0) * w_stride, w_stride, r1 - r0, xa, xa_stride, n, o + r0, m, k);
      if (bias) {
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t r = r0; r < r1; ++r) o[t * m + r] += bias_at(bias, r);
        }
      }
    });
    return;
  }
  auto rows = [&](int64_t r0, int64_t r1, int) {
    for (int64_t rt = r0; rt < r1; rt += kRowTile) {
      const int64_t rt_end = std::min(r1, rt + kRowTile);
      for (int64_t t = 0; t < n; ++t) {
        const void* xt = xa + static_cast<size_t>(t) * xa_stride;
        for (int64_t r = rt; r < rt_end; ++r) {
          const float v = rd.fn(wbase + static_cast<size_t>(r) * w_stride, xt, k);
          o[t * m + r] = bias ? v + bias_at(bias, r) : v;
        }
      }
    }
  };
  pool.parallel_for(m, rows, kRowTile);
}

}  // namespace corvid::ops::cpu

namespace corvid::ops {

void set_quantized_matmul(QuantizedMatmul mode) { cpu::g_quantized_mode.store(mode); }
QuantizedMatmul quantized_matmul() { return cpu::g_quantized_mode.load(); }

}  // namespace corvid::ops
