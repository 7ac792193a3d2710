// The GPU row layouts of Q4_0, Q4_1, Q8_0 and Q4_K (core/dtype.h: Q4_0R, Q4_1R, Q8_0R,
// Q4_KR), made once when weights are uploaded. A GGUF block is scale(s) then quants (18, 20 or 34
// bytes), so 32-value blocks sit at 2- or 4-byte alignment and a GEMV must read them
// with narrow loads or stage them through shared memory. Moving each row's quants to
// the front (16 or 32 bytes a block, contiguous) and its scales behind them keeps the
// row's bytes and length, and lets gemv_direct.cu read quants with 16-byte loads.
// Q4_K super-blocks are already 16-byte aligned, but 16 bytes of their quants hold the
// halves of two sub-blocks (chunk c: low nibbles values 64c..64c+31, high nibbles the
// next 32), so a GEMV unit met two activation blocks and two scale pairs; Q4_KR
// regroups the nibbles so 16 bytes are one 32-value sub-block (as Q4_0R) and moves the
// 16-byte headers (d, dmin, packed 6-bit scales and minimums) behind the quants.
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

namespace {

// One thread per 32-value block: quants to row + b * kQuantBytes, scale(s) to the
// row's scale area. Byte copies: this runs once per weight at load time.
template <int kBlockBytes, int kScaleBytes>
__global__ void split_blocks_kernel(const uint8_t* __restrict__ raw, uint8_t* __restrict__ dst, int64_t rows,
                                    int64_t blocks_per_row, size_t row_bytes) {
  constexpr int kQuantBytes = kBlockBytes - kScaleBytes;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * blocks_per_row) return;
  const int64_t r = idx / blocks_per_row, b = idx % blocks_per_row;
  const uint8_t* src = raw + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * kBlockBytes;
  uint8_t* row = dst + static_cast<size_t>(r) * row_bytes;
  uint8_t* quants = row + static_cast<size_t>(b) * kQuantBytes;
  uint8_t* scales = row + static_cast<size_t>(blocks_per_row) * kQuantBytes + static_cast<size_t>(b) * kScaleBytes;
#pragma unroll
  for (int i = 0; i < kScaleBytes; ++i) scales[i] = src[i];
#pragma unroll
  for (int i = 0; i < kQuantBytes; ++i) quants[i] = src[kScaleBytes + i];
}

// One thread per 32-value sub-block j of super-block s: its 16 regrouped quant bytes
// (byte i: value i in the low nibble, value 16 + i in the high one), and for j == 0 the
// super-block's header, copied as is.
__global__ void regroup_q4_k_kernel(const uint8_t* __restrict__ raw, uint8_t* __restrict__ dst, int64_t rows,
                                    int64_t supers_per_row, size_t row_bytes) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t units_per_row = supers_per_row * 8;
  if (idx >= rows * units_per_row) return;
  const int64_t r = idx / units_per_row, u = idx % units_per_row, s = u / 8;
  const int j = static_cast<int>(u % 8), chunk = j / 2, shift = 4 * (j % 2);
  const uint8_t* super = raw + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(s) * kQ4_KBytes;
  const uint8_t* qs = super + 16 + 32 * chunk;
  uint8_t* row = dst + static_cast<size_t>(r) * row_bytes;
  uint8_t* quants = row + static_cast<size_t>(u) * 16;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    quants[i] = static_cast<uint8_t>(((qs[i] >> shift) & 0xF) | (((qs[16 + i] >> shift) & 0xF) << 4));
  if (j == 0) {
    uint8_t* header = q4_kr_header(row, units_per_row, u);
#pragma unroll
    for (int i = 0; i < 16; ++i) header[i] = super[i];
  }
}

}  // namespace

void rearrange_weight(const Tensor& raw, const Tensor& dst) {
  Context& ctx = context();
  const int64_t rows = raw.rows(), blocks_per_row = raw.cols() / 32;
  const unsigned grid = blocks_for(rows * blocks_per_row, 256);
  const uint8_t* src = raw.ptr<uint8_t>();
  uint8_t* out = dst.ptr<uint8_t>();
  const size_t row_bytes = raw.row_bytes();
  if (rows * blocks_per_row == 0) return;
  switch (raw.dtype) {
    case DType::Q4_0:
      split_blocks_kernel<kQ4_0Bytes, 2><<<grid, 256, 0, ctx.stream>>>(src, out, rows, blocks_per_row, row_bytes);
      break;
    case DType::Q4_1:
      split_blocks_kernel<kQ4_1Bytes, 4><<<grid, 256, 0, ctx.stream>>>(src, out, rows, blocks_per_row, row_bytes);
      break;
    case DType::Q8_0:
      split_blocks_kernel<kQ8_0Bytes, 2><<<grid, 256, 0, ctx.stream>>>(src, out, rows, blocks_per_row, row_bytes);
      break;
    case DType::Q4_K:
      regroup_q4_k_kernel<<<blocks_for(rows * blocks_per_row, 256), 256, 0, ctx.stream>>>(src, out, rows,
                                                                                            raw.cols() / 256, row_bytes);
      CORVID_CUDA_LAUNCHED("regroup_q4_k_kernel");
      return;
    default:
      fail("CUDA rearrange_weight: no GPU row layout for ", dtype_name(raw.dtype));
  }
  CORVID_CUDA_LAUNCHED("split_blocks_kernel");
}

}  // namespace corvid::ops::cuda
