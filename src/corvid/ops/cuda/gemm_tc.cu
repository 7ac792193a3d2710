// Prefill GEMM on tensor cores (QuantizedMatmul::Fast, the default).
//
// out[n, m] = x[n, k] @ w[m, k]^T with 16-bit operands and fp32 accumulation and
// output, through cuBLASLt (gemm_cublaslt.cuh; cublasGemmEx where it declines) or, for
// the block formats on Hopper, gemm_wgmma.cu's own kernel. The activations are rounded
// to the GEMM's 16-bit type once per call: f16 for f16 weights (so the weights stay
// exact) and for the block formats, bf16 for bf16 and F32 weights. bf16/f16 weights are
// used in place; the block formats and F32 are decoded into a row tile of that type
// first (where the wgmma kernel does not take them). A block value is at
// most 8 significant bits times an f16 scale: in f16 it keeps 11 bits where bf16 keeps
// 8, and the block formats' own GEMM (gemm_wgmma.cu) decodes in f16 arithmetic; f16
// activations are what llama.cpp feeds cuBLAS too (finite up to 65504).
// Rounding the operands to 16 bits is the whole numerical difference from the Exact
// path (F32 SGEMM): tests/unit/cuda_prefill_test.cc checks the result against a
// double-precision product of the rounded operands.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/decode8.cuh"
#include "corvid/ops/cuda/gemm_cublaslt.cuh"
#include "corvid/ops/cuda/gemm_tc.cuh"
#include "corvid/ops/cuda/gemm_wgmma.cuh"
#include "corvid/ops/cuda/half_out.cuh"
#include "corvid/ops/cuda/ptx.cuh"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

namespace {

uint64_t g_operand_reuses = 0;

// The 16-bit weight tile: 256 MiB, a whole 8B-model matrix. Tiles small enough to stay in
// L2 lose far more to the shorter GEMMs than they save (Q4_0 pp512 on an H200: 26.9k
// tok/s with 256 MiB, 18.5k with 32 MiB, 14.5k with 12 MiB).
constexpr int64_t kTileElems = int64_t{128} << 20;

// x rounded to the GEMM's 16-bit operand, four values a thread (count % 4 == 0: k % 8 == 0).
__global__ void round_activations_kernel(const float4* __restrict__ x, uint2* __restrict__ y, int64_t count4, bool f16) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count4) return;
  const float4 v = x[i];
  y[i] = make_uint2(half_bits2(v.x, v.y, f16), half_bits2(v.z, v.w, f16));
}

// Decodes a row tile into 16-bit values (f16 or bf16, half_bits), eight consecutive
// values per thread (one 16-byte store). Indices are 32-bit: a tile holds at most
// kTileElems values, and k is a multiple of 8, so a group of eight never straddles two rows.
template <DType T>
__global__ void dequant_tile_kernel(const uint8_t* __restrict__ w, uint16_t* __restrict__ dst, uint32_t groups,
                                    uint32_t groups_per_row, uint32_t row_bytes, bool f16) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const uint32_t r = g / groups_per_row, i0 = (g % groups_per_row) * 8;
  float v[8];
  decode8<T>(w + static_cast<size_t>(r) * row_bytes, i0, groups_per_row * 8, v);
  const uint4 packed{half_bits2(v[0], v[1], f16), half_bits2(v[2], v[3], f16), half_bits2(v[4], v[5], f16),
                     half_bits2(v[6], v[7], f16)};
  *reinterpret_cast<uint4*>(dst + static_cast<size_t>(g) * 8) = packed;
}

// out = xr @ w^T through cuBLAS: 16-bit weights in place, any other format decoded into
// a 16-bit tile (f16 or bf16, as the operand) first (kTileElems values at a time).
// cuBLASLt adds an F32 bias in its epilogue; returns whether it added `bias` (null: none).
bool gemm_cublas(Context& ctx, const uint16_t* xr, const Tensor& w, const Tensor& out, const Tensor* bias, bool f16,
                 std::optional<OpTimer>& part) {
  const int64_t n = out.rows(), m = w.rows(), k = w.cols();
  const cudaDataType operand = f16 ? CUDA_R_16F : CUDA_R_16BF;
  const float one = 1.0f, zero = 0.0f;
  const bool in_place = w.dtype == DType::F16 || w.dtype == DType::BF16;
  const int64_t tile_rows = in_place ? m : std::max<int64_t>(1, std::min(m, kTileElems / k));
  auto* tile = in_place ? nullptr : static_cast<uint16_t*>(ctx.scratch(static_cast<size_t>(tile_rows * k) * 2));
  // The epilogue adds an F32 bias to a whole-matrix GEMM (16-bit weights: one pass);
  // tiles leave the bias to the caller, so that a tile cuBLASLt declines cannot leave
  // the bias half added.
  const float* bias32 = in_place && bias && bias->dtype == DType::F32 ? bias->ptr<float>() : nullptr;
  bool bias_added = bias32 != nullptr;
  for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, m - r0);
    const void* wp = nullptr;
    if (in_place) {
      wp = w.ptr<uint8_t>() + static_cast<size_t>(r0) * w.row_bytes();
    } else {
      const uint8_t* src = w.ptr<uint8_t>() + static_cast<size_t>(r0) * w.row_bytes();
      part.emplace("matmul.dequant");
      dispatch_weight_dtype(w.dtype, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        const auto groups = static_cast<uint32_t>(rows * k / 8);
        dequant_tile_kernel<T><<<blocks_for(groups, 256), 256, 0, ctx.stream>>>(
            src, tile, groups, static_cast<uint32_t>(k / 8), static_cast<uint32_t>(w.row_bytes()), f16);
        CORVID_CUDA_LAUNCHED("dequant_tile_kernel");
      });
      wp = tile;
    }
    part.emplace("matmul.gemm");
    const LtGemm lt{wp, xr, out.ptr<float>() + r0, bias32, rows, n, k, m, f16};
    if (lt_gemm(ctx, lt)) continue;
    // cuBLASLt declined (no algorithm, unaligned bias, CORVID_NO_CUBLASLT): then the caller adds the bias.
    bias_added = false;
    // Row-major out[n, m] is column-major out^T [m, n] = W_tile^T-view (k x rows, transposed) * x^T.
    CORVID_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                     static_cast<int>(k), &one, wp, operand, static_cast<int>(k), xr, operand,
                                     static_cast<int>(k), &zero, out.ptr<float>() + r0, CUDA_R_32F,
                                     static_cast<int>(m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return bias_added;
}

}  // namespace

uint64_t gemm_operand_reuses() { return g_operand_reuses; }

bool gemm_tensor_cores_supported(const Tensor& x, const Tensor& w) {
  // Row pitches must keep cuBLAS's 16-byte alignment for 16-bit operands.
  // (x is rounded four values at a time: float4 loads.)
  return x.dtype == DType::F32 && w.cols() % 8 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
         dispatch_weight_dtype(w.dtype, [](auto) {});
}

bool gemm_tensor_cores(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias) {
  Context& ctx = context();
  const int64_t n = x.rows(), m = w.rows(), k = w.cols();
  CORVID_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX, "CUDA matmul: dimensions exceed cuBLAS int range");
  // f16 operands for f16 weights and the block formats, bf16 for bf16 and F32 (see above).
  const bool f16 = w.dtype == DType::F16 || is_quantized(w.dtype);

  // x as 16-bit operands: made by x's producer or the GEMM before (Context::GemmOperand),
  // else rounded here.
  Context::GemmOperand& made = ctx.gemm_operand;
  const bool ready = made.data != nullptr && made.describes(x.data, n, k, ctx.ops_run) && made.f16 == f16;
  uint16_t* xr = ready ? made.data : ctx.gemm_operand_buffer(n * k);
  g_operand_reuses += ready;
  ctx.gemm_operand_f16 = f16;
  std::optional<OpTimer> part;
  if (!ready) {
    part.emplace("matmul.round");
    round_activations_kernel<<<blocks_for(n * k / 4, 256), 256, 0, ctx.stream>>>(
        reinterpret_cast<const float4*>(x.data), reinterpret_cast<uint2*>(xr), n * k / 4, f16);
    CORVID_CUDA_LAUNCHED("round_activations_kernel");
  }

  bool bias_added = false;
  if (gemm_quantized_wgmma_supported(ctx, w.dtype, w.data, w.row_bytes(), n, m, k)) {
    // The block formats' own GEMM: no 16-bit tile (gemm_wgmma.cu).
    part.emplace("matmul.wgmma");
    gemm_quantized_wgmma(ctx, w.dtype, xr, w.ptr<uint8_t>(), w.row_bytes(), out.ptr<float>(), n, m, k);
  } else {
    bias_added = gemm_cublas(ctx, xr, w, out, bias, f16, part);
  }
  // The next GEMM may read the same x (q, k and v): pass the operand on. x is unchanged,
  // since ops::matmul refuses an out that overlaps it.
  made = gemm_operand_fusion() ? Context::GemmOperand{{x.data, n, k, ctx.ops_run}, f16, xr} : Context::GemmOperand{};
  return bias_added;
}

}  // namespace corvid::ops::cuda
