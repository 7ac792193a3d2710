// matmul and embedding on the GPU.
//
// Decode (n <= kGemvMaxCols tokens) is a GEMV that reads each weight byte once.
// gemv_tiled.cu has the fast kernels (F16/BF16/Q8_0/Q4_0/Q4_1/Q4_K/Q6_K with
// 16-byte-aligned rows; in Fast numerics the block formats among them run
// gemv_dp4a.cu's int8-activation kernels instead); the general kernels here cover the rest:
// one warp per output row, lanes striding over the row, every column of x dotted
// with the same decoded weights, fp32 accumulation, a shuffle reduction at the
// end. F32/F16/BF16 rows are read with 16-byte loads; Q8_0/Q4_0/Q4_1 rows one
// whole 32-element block per lane (adjacent lanes read adjacent blocks, so a
// warp's loads are contiguous); the other block formats decode per element.
//
// Prefill (larger n) runs on tensor cores with 16-bit operands (gemm_tc.cu) by
// default; with QuantizedMatmul::Exact it dequantizes the weight to F32 in row
// tiles and calls cuBLAS SGEMM (no TF32), so quantized weights are multiplied
// exactly as stored, with unquantized activations.
#include <algorithm>
#include <utility>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/gemm_tc.cuh"
#include "corvid/ops/cuda/gemv.cuh"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/warp.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int64_t kDequantTileElems = int64_t{32} << 20;  // F32 tile for the cuBLAS path: 128 MiB


// Dots of one 32-element quantized block (b: its first byte) with x[c][0..32) for every column c.
template <DType T, int kCols>
__device__ __forceinline__ void block_dot(const uint8_t* b, const float* x, int64_t ldx, int n, float (&acc)[kCols]) {
  float w[32];
  if constexpr (T == DType::Q8_0) {
    const float d = half_to_float(load_u16(b));
    // 34-byte blocks are 2-byte aligned: read the quants as 16 u16 words.
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint16_t q = load_u16(b + 2 + 2 * j);
      w[2 * j] = d * static_cast<float>(static_cast<int8_t>(q & 0xFF));
      w[2 * j + 1] = d * static_cast<float>(static_cast<int8_t>(q >> 8));
    }
  } else if constexpr (T == DType::Q4_0) {
    const float d = half_to_float(load_u16(b));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t q = load_u16(b + 2 + 2 * j);
      w[2 * j] = d * static_cast<float>((q & 0xF) - 8);
      w[2 * j + 1] = d * static_cast<float>(((q >> 8) & 0xF) - 8);
      w[2 * j + 16] = d * static_cast<float>(((q >> 4) & 0xF) - 8);
      w[2 * j + 17] = d * static_cast<float>((q >> 12) - 8);
    }
  } else {  // Q4_1: 20-byte blocks are 4-byte aligned
    const uint32_t dm = *reinterpret_cast<const uint32_t*>(b);
    const float d = half_to_float(static_cast<uint16_t>(dm & 0xFFFF)), m = half_to_float(static_cast<uint16_t>(dm >> 16));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t q = *reinterpret_cast<const uint32_t*>(b + 4 + 4 * j);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        w[4 * j + e] = d * static_cast<float>((q >> (8 * e)) & 0xF) + m;
        w[4 * j + e + 16] = d * static_cast<float>((q >> (8 * e + 4)) & 0xF) + m;
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    if (c >= n) break;
    const float4* xv = reinterpret_cast<const float4*>(x + c * ldx);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 v = xv[j];
      s += w[4 * j] * v.x + w[4 * j + 1] * v.y + w[4 * j + 2] * v.z + w[4 * j + 3] * v.w;
    }
    acc[c] += s;
  }
}

// out[c, row] = x[c, :] . w[row, :] (+ bias[row]) for c < n <= kGemvMaxCols.
template <DType T>
__global__ void gemv_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w, float* __restrict__ out,
                            const void* bias, DType bias_t, int64_t m, int64_t k, size_t row_bytes, int n) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= m) return;
  const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
  float acc[kGemvMaxCols] = {};
  if constexpr (T == DType::Q8_0 || T == DType::Q4_0 || T == DType::Q4_1) {
    constexpr int bytes = T == DType::Q8_0 ? kQ8_0Bytes : T == DType::Q4_0 ? kQ4_0Bytes : kQ4_1Bytes;
    for (int64_t blk = lane; blk < k / 32; blk += 32) block_dot<T, kGemvMaxCols>(wr + blk * bytes, x + blk * 32, k, n, acc);
  } else if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
    // 16 bytes per lane per step: 4 floats or 8 halves. The host only takes this path
    // when k is a multiple of the vector width (rows then stay 16-byte aligned).
    constexpr int kVec = T == DType::F32 ? 4 : 8;
    for (int64_t i = static_cast<int64_t>(lane) * kVec; i < k; i += 32 * kVec) {
      const uint4 raw = *reinterpret_cast<const uint4*>(wr + i * (T == DType::F32 ? 4 : 2));
      float wv[kVec];
      if constexpr (T == DType::F32) {
        wv[0] = __uint_as_float(raw.x); wv[1] = __uint_as_float(raw.y);
        wv[2] = __uint_as_float(raw.z); wv[3] = __uint_as_float(raw.w);
      } else {
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint16_t lo = static_cast<uint16_t>(words[j] & 0xFFFF), hi = static_cast<uint16_t>(words[j] >> 16);
          wv[2 * j] = T == DType::F16 ? half_to_float(lo) : bf16_to_float(lo);
          wv[2 * j + 1] = T == DType::F16 ? half_to_float(hi) : bf16_to_float(hi);
        }
      }
#pragma unroll
      for (int c = 0; c < kGemvMaxCols; ++c) {
        if (c >= n) break;
        const float* xc = x + c * k + i;
#pragma unroll
        for (int j = 0; j < kVec; ++j) acc[c] += wv[j] * xc[j];
      }
    }
  } else {
    for (int64_t i = lane; i < k; i += 32) {
      const float wv = element<T>(wr, i, k);
#pragma unroll
      for (int c = 0; c < kGemvMaxCols; ++c)
        if (c < n) acc[c] += wv * x[c * k + i];
    }
  }
  const float b = bias_at(bias, bias_t, row);
#pragma unroll
  for (int c = 0; c < kGemvMaxCols; ++c) {
    if (c >= n) break;
    const float s = warp_sum(acc[c]);
    if (lane == 0) out[c * m + row] = s + b;
  }
}

// Scalar fallback for float rows whose length is not a multiple of the vector width.
template <DType T>
__global__ void gemv_scalar_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w, float* __restrict__ out,
                                   const void* bias, DType bias_t, int64_t m, int64_t k, size_t row_bytes, int n) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= m) return;
  const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
  const float b = bias_at(bias, bias_t, row);
  for (int c = 0; c < n; ++c) {
    float acc = 0.0f;
    for (int64_t i = lane; i < k; i += 32) acc += element<T>(wr, i, k) * x[c * k + i];
    acc = warp_sum(acc);
    if (lane == 0) out[c * m + row] = acc + b;
  }
}

// dst[r, :] = rows r0.. of w as F32 (element-wise decode; dst has `rows` x k floats).
template <DType T>
__global__ void dequant_kernel(const uint8_t* __restrict__ w, float* __restrict__ dst, int64_t rows, int64_t k,
                               size_t row_bytes) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * k) return;
  const int64_t r = idx / k, i = idx % k;
  dst[idx] = element<T>(w + static_cast<size_t>(r) * row_bytes, i, k);
}

__global__ void add_bias_kernel(float* out, const void* bias, DType bias_t, int64_t n, int64_t m) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < n * m) out[idx] += bias_at(bias, bias_t, idx % m);
}

template <DType T>
__global__ void embedding_kernel(const uint8_t* __restrict__ table, const int32_t* __restrict__ ids,
                                 float* __restrict__ out, int64_t n, int64_t d, size_t row_bytes) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * d) return;
  const int64_t t = idx / d, i = idx % d;
  out[idx] = element<T>(table + static_cast<size_t>(ids[t]) * row_bytes, i, d);
}

bool vector_rows(DType t, int64_t k) {
  return (t == DType::F32 && k % 4 == 0) || ((t == DType::F16 || t == DType::BF16) && k % 8 == 0);
}

void gemv(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias, int64_t c0, int n) {
  Context& ctx = context();
  const int64_t m = w.rows(), k = w.cols();
  const float* xp = x.ptr<float>() + c0 * k;
  float* op = out.ptr<float>() + c0 * m;
  const void* bp = bias ? bias->data : nullptr;
  const DType bt = bias ? bias->dtype : DType::F32;
  const GemvArgs args{xp, w.ptr<uint8_t>(), op, bp, bt, m, k, w.row_bytes(), n};
  if (gemv_tiled(w.dtype, args, ctx.stream)) return;
  const unsigned grid = blocks_for(m, kWarpsPerBlock);
  const bool is_float = w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16;
  dispatch_weight_dtype(w.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if (is_float && !vector_rows(T, k)) {
      gemv_scalar_kernel<T><<<grid, kWarpsPerBlock * 32, 0, ctx.stream>>>(xp, w.ptr<uint8_t>(), op, bp, bt, m, k,
                                                                          w.row_bytes(), n);
      CORVID_CUDA_LAUNCHED("gemv_scalar_kernel");
    } else {
      gemv_kernel<T><<<grid, kWarpsPerBlock * 32, 0, ctx.stream>>>(xp, w.ptr<uint8_t>(), op, bp, bt, m, k,
                                                                   w.row_bytes(), n);
      CORVID_CUDA_LAUNCHED("gemv_kernel");
    }
  });
}

// out[n, m] = x[n, k] @ w[m, k]^T through SGEMM on F32 weights (dequantized in row tiles).
void gemm_via_f32(const Tensor& x, const Tensor& w, const Tensor& out) {
  Context& ctx = context();
  const int64_t n = x.rows(), m = w.rows(), k = w.cols();
  CORVID_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX, "CUDA matmul: dimensions exceed cuBLAS int range");
  const int64_t tile_rows = w.dtype == DType::F32 ? m : std::max<int64_t>(1, std::min(m, kDequantTileElems / k));
  float* tile = w.dtype == DType::F32 ? nullptr : static_cast<float*>(ctx.scratch(static_cast<size_t>(tile_rows * k) * 4));
  const float one = 1.0f, zero = 0.0f;
  for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, m - r0);
    const float* wf = nullptr;
    if (w.dtype == DType::F32) {
      wf = w.ptr<float>() + r0 * k;
    } else {
      const uint8_t* src = w.ptr<uint8_t>() + static_cast<size_t>(r0) * w.row_bytes();
      dispatch_weight_dtype(w.dtype, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        dequant_kernel<T><<<blocks_for(rows * k, 256), 256, 0, ctx.stream>>>(src, tile, rows, k, w.row_bytes());
        CORVID_CUDA_LAUNCHED("dequant_kernel");
      });
      wf = tile;
    }
    // Row-major out[n, m] is column-major out^T [m, n]: out^T = W_tile (k x rows, transposed) * x^T.
    CORVID_CUBLAS_CHECK(cublasSgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                    static_cast<int>(k), &one, wf, static_cast<int>(k), x.ptr<float>(),
                                    static_cast<int>(k), &zero, out.ptr<float>() + r0, static_cast<int>(m)));
  }
}

void add_bias(const Tensor& out, const Tensor& bias) {
  const int64_t n = out.rows(), m = out.cols();
  add_bias_kernel<<<blocks_for(n * m, 256), 256, 0, context().stream>>>(out.ptr<float>(), bias.data, bias.dtype, n, m);
  CORVID_CUDA_LAUNCHED("add_bias_kernel");
}

// The kernels hard-code the GGUF block sizes; a layout change in core/dtype must not go unnoticed.
void check_block_sizes() {
  static const bool ok = [] {
    const std::pair<DType, int> sizes[] = {{DType::Q4_0, kQ4_0Bytes}, {DType::Q4_1, kQ4_1Bytes},
                                           {DType::Q5_0, kQ5_0Bytes}, {DType::Q5_1, kQ5_1Bytes},
                                           {DType::Q8_0, kQ8_0Bytes}, {DType::Q4_K, kQ4_KBytes},
                                           {DType::Q5_K, kQ5_KBytes}, {DType::Q6_K, kQ6_KBytes}};
    for (const auto& [t, bytes] : sizes)
      CORVID_CHECK(dtype_info(t).block_bytes == bytes, "CUDA backend: ", dtype_name(t), " blocks are ",
                   dtype_info(t).block_bytes, " bytes, the kernels assume ", bytes);
    return true;
  }();
  (void)ok;
}

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias) {
  check_block_sizes();
  CORVID_CHECK(dispatch_weight_dtype(w.dtype, [](auto) {}), "CUDA matmul: unsupported weight dtype ",
               dtype_name(w.dtype));
  const int64_t n = x.rows();
  if (n <= kGemvMaxCols) {
    gemv(x, w, out, bias, 0, static_cast<int>(n));
  } else {
    // Prompts run on tensor cores (16-bit operands) unless the user asked for exact numerics.
    bool bias_added = false;
    if (quantized_matmul() == QuantizedMatmul::Fast && gemm_tensor_cores_supported(x, w)) {
      bias_added = gemm_tensor_cores(x, w, out, bias);
    } else {
      gemm_via_f32(x, w, out);
    }
    if (bias && !bias_added) add_bias(out, *bias);
  }
}

namespace {
GemvArgs glu_gemv_args(const Tensor& x, const Tensor& w, const Tensor& out) {
  return GemvArgs{x.ptr<float>(), w.ptr<uint8_t>(), out.ptr<float>(), nullptr, DType::F32, w.rows(), w.cols(),
                  w.row_bytes(), 1};
}
}  // namespace

bool matmul_glu_fuses(const Tensor& x, const Tensor& w, const Tensor& out) {
  return x.rows() == 1 && gemv_dp4a_glu_supports(w.dtype, glu_gemv_args(x, w, out));
}

void matmul_glu(const Tensor& x, const Tensor& w, const Tensor& out, GatedActivation act) {
  gemv_dp4a_glu(w.dtype, glu_gemv_args(x, w, out),
                act == GatedActivation::GeluTanh ? GemvGlu::GeluTanh : GemvGlu::Silu, context().stream);
}

void embedding(const Tensor& table, const Indices& ids, const Tensor& out) {
  Context& ctx = context();
  check_block_sizes();
  const int64_t n = static_cast<int64_t>(ids.size()), d = table.cols();
  if (n == 0) return;
  const int32_t* dev_ids = ctx.indices(UploadSlot::Ids, ids);
  const bool ok = dispatch_weight_dtype(table.dtype, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    embedding_kernel<T><<<blocks_for(n * d, 256), 256, 0, ctx.stream>>>(table.ptr<uint8_t>(), dev_ids,
                                                                         out.ptr<float>(), n, d, table.row_bytes());
    CORVID_CUDA_LAUNCHED("embedding_kernel");
  });
  CORVID_CHECK(ok, "CUDA embedding: unsupported table dtype ", dtype_name(table.dtype));
}

}  // namespace corvid::ops::cuda
