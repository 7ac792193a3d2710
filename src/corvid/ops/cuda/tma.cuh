// Hopper's tensor memory accelerator (TMA) and the shared-memory barriers it signals
// (sm_90a device code: callers compile it under __CUDA_ARCH_FEAT_SM90_ALL), plus the
// host side that describes a matrix to it (tma.cu): 16-bit values in the 128-byte
// swizzle, or rows of bytes stored densely.
//
// One thread asks for a whole tile (cp.async.bulk.tensor): the copy engine writes it into
// shared memory, in the 128-byte swizzle wgmma reads, zero-filling rows past the matrix,
// and counts the bytes on an mbarrier; threads wait on the barrier's phase. A tile takes
// one instruction instead of a 16-byte cp.async per thread and chunk.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace corvid::ops::cuda {

// A row-major matrix of `rows` x `cols` 16-bit values (f16: the data type's name only
// matters for out-of-bounds fill, which is zero for both) read in tiles of `box_rows` x 64
// values (128 bytes, the swizzle's span), 128-byte swizzled. data 16-byte aligned,
// cols % 8 == 0.
CUtensorMap tma_matrix_16bit(const void* data, int64_t rows, int64_t cols, int box_rows);
// `rows` rows of `cols` bytes, `stride` bytes apart, read in tiles of box_rows x box_cols
// bytes stored densely (no swizzle); bytes past `cols` arrive as zeros. data and stride
// 16-byte aligned, box_cols % 16 == 0.
CUtensorMap tma_matrix_bytes(const void* data, int64_t rows, int64_t cols, int64_t stride, int box_cols, int box_rows);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialized barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// This thread's arrival, announcing `bytes` that copies will deliver in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// Tile at (column col, row row) of the matrix `map` describes into shared memory at dst,
// its bytes counted on bar. The tile's first byte in global memory must be 16-byte
// aligned (col * element size % 16 == 0), else the instruction faults.
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap* map, int col, int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(bar)
      : "memory");
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace corvid::ops::cuda
