// Bandwidth-tuned decode GEMV for the weight formats decode speed depends on
// (F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K), with F32 activations and exact F32
// arithmetic (no activation quantization), so results match the general kernels'.
//
// Why this shape:
// - Block formats are 18/20/34/144/210 bytes long, so per-block loads straight from
//   global memory are narrow and scattered across a warp. Instead each thread block
//   copies a tile of kRows rows with 16-byte cp.async loads (contiguous across the
//   block, L1 bypassed), two tiles in flight, and threads decode from shared memory,
//   where narrow reads are cheap.
// - One thread reads 8 activations per tile and dots them with the matching 8
//   weights of every row of the block: the activation traffic (4 bytes a value
//   against 0.5-2 bytes of weight) is paid once for kRows rows.
// - Quantized values become floats exactly without the slow int->float converter:
//   a byte q placed in the mantissa of 2^23 is the float 2^23 + q, and subtracting
//   2^23 (+ the format's zero point) is exact. Per-group scales are applied once per
//   8 products: sum(w*x) = a*sum(q*x) + b*sum(x).
// - Each block ends with warp shuffles and one shared-memory pass; no atomics.
// - Grid: F16/BF16 run persistent (as many blocks as the GPU holds, each streaming
//   row groups with the next tile always in flight: +4% on the 8B shapes); the block
//   formats one block per row group (persistent measured 2-3% slower there).
//
// Where it stands (H200, docs/benchmarks.md): BF16 reaches 81-100% of the copy
// bandwidth on the large matrices; the block formats run at ~2.5e12 weights/s whatever
// their size, so they are bound by instructions per weight (decode + exact F32 FMA,
// ~9 per weight with the per-tile overhead), not by bytes. In Fast numerics the block
// formats run gemv_dp4a.cu instead (int8 activations, dp4a); these kernels serve Exact.
#include <algorithm>
#include <cstdint>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv.cuh"
#include "corvid/ops/cuda/pdl.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;                   // weight rows per thread block
constexpr int kTileElems = kThreads * 8;   // one 8-value group per thread per row and tile
constexpr float kMagic = 8388608.0f;       // 2^23

GemvKernels g_kernels = GemvKernels::Auto;

template <DType T>
constexpr int kTileBytes = kTileElems / GemvFormat<T>::kElems * GemvFormat<T>::kBytes;
template <DType T>
constexpr bool kIsFloat = T == DType::F16 || T == DType::BF16;
// Tiles in flight per block. Four stages for the block formats measured ~3-5% slower
// than two on the H200 (2026-11-30): the extra shared memory (6 blocks x 35 KiB for
// Q8_0) leaves too little of the SM's 256 KiB L1 for the activations (57 KiB at k =
// 14336), and those kernels are not short of bytes in flight.
template <DType T>
constexpr int kStages = 2;
// Blocks one SM holds at once, fixed at compile time (the launch bounds cap registers
// to fit them) so that the persistent grid needs no occupancy query, which could fall
// inside a CUDA graph capture: single-token blocks use ~40 registers a thread, and 6
// blocks of at most 33 KiB shared memory fit an SM's 228 KiB; the 8-token form keeps
// 8 x 4 accumulators and more activations in registers, one block per SM.
template <DType T, int NC>
constexpr int kBlocksPerSm = NC == 1 ? 6 : 1;
// Formats whose values are a*q + b with a nonzero b (a per-group minimum).
template <DType T>
constexpr bool kHasOffset = T == DType::Q4_1 || T == DType::Q4_K;

static_assert(kTileBytes<DType::Q6_K> % 16 == 0 && kTileBytes<DType::Q8_0> % 16 == 0 &&
                  kTileBytes<DType::Q4_0> % 16 == 0 && kTileBytes<DType::Q4_1> % 16 == 0,
              "a whole tile must be a run of 16-byte copies");



// 2^23 + (byte i of word), exactly.
__device__ __forceinline__ float magic_byte(uint32_t word, int i) {
  return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | static_cast<unsigned>(i)));
}


// The 8 small integers of two words of bytes, minus `zero`, as exact floats.
__device__ __forceinline__ void bytes_to_floats(uint2 v, float zero, float (&q)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    q[i] = magic_byte(v.x, i) - (kMagic + zero);
    q[i + 4] = magic_byte(v.y, i) - (kMagic + zero);
  }
}

// Group g (values 8g..8g+7) of one row's tile in shared memory: weights = a*q + b
// (float formats: q are the weights, a = 1, b = 0).
template <DType T>
__device__ __forceinline__ void decode_group(const uint8_t* tile, int g, float (&q)[8], float& a, float& b) {
  a = 1.0f;
  b = 0.0f;
  if constexpr (kIsFloat<T>) {
    const uint4 raw = *reinterpret_cast<const uint4*>(tile + 16 * g);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (T == DType::BF16) {
        q[2 * j] = __uint_as_float(words[j] << 16);
        q[2 * j + 1] = __uint_as_float(words[j] & 0xFFFF0000u);
      } else {
        q[2 * j] = half_to_float(static_cast<uint16_t>(words[j] & 0xFFFF));
        q[2 * j + 1] = half_to_float(static_cast<uint16_t>(words[j] >> 16));
      }
    }
  } else {
    uint2 v;
    group_quants<T>(tile, g, v, a, b);
    if constexpr (T == DType::Q8_0) {  // int8 -> uint8 + 128
      v.x ^= 0x80808080u;
      v.y ^= 0x80808080u;
    }
    bytes_to_floats(v, T == DType::Q8_0 ? 128.0f : static_cast<float>(group_zero<T>), q);
  }
}

// out[c, row] for c < n <= NC. Persistent: block b takes row groups (kRows rows each)
// b, b + gridDim.x, ...; its (row group, tile) items form one stream with kStages<T>
// tiles in flight, so a block keeps loading while it computes and finishes groups.
template <DType T, int NC>
__global__ void __launch_bounds__(kThreads, (kBlocksPerSm<T, NC>)) gemv_tiled_kernel(const GemvArgs args) {
  constexpr int kBytes = kTileBytes<T>, kS = kStages<T>;
  static_assert(kBlocksPerSm<T, NC> * (kS * kRows * kBytes + (kThreads / 32) * kRows * NC * 4 + 1024) <= 228 * 1024,
                "the blocks counted per SM must fit its shared memory");
  __shared__ __align__(16) uint8_t tiles[kS][kRows][kBytes];
  __shared__ float partial[kThreads / 32][kRows * NC];
  const int tid = threadIdx.x;
  const int64_t groups = (args.m + kRows - 1) / kRows;
  const int tiles_per_row = static_cast<int>((args.k + kTileElems - 1) / kTileElems);
  // The host keeps grid <= groups and groups * tiles_per_row within int range.
  const int items = static_cast<int>((groups - blockIdx.x + gridDim.x - 1) / gridDim.x) * tiles_per_row;
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * kRows;
  constexpr int kFullChunks = kBytes / 16;

  // Copies the next item's rows, 16 bytes at a time; the last tile of a row may be
  // short (its byte count is still a multiple of 16: the host checks row_bytes).
  // Cursors advance incrementally: 64-bit divisions per item would cost more than the math.
  int issued = 0, issue_tile = 0;
  int64_t issue_row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  auto issue_next = [&]() {
    if (issued < items) {
      const int64_t k0 = static_cast<int64_t>(issue_tile) * kTileElems;
      const int rows = static_cast<int>(std::min<int64_t>(kRows, args.m - issue_row0));
      const int elems = static_cast<int>(std::min<int64_t>(kTileElems, args.k - k0));
      const int chunks = elems / GemvFormat<T>::kElems * GemvFormat<T>::kBytes / 16;
      const uint8_t* src = args.w + static_cast<size_t>(issue_row0) * args.row_bytes +
                           static_cast<size_t>(k0 / GemvFormat<T>::kElems) * GemvFormat<T>::kBytes;
      uint8_t(*stage)[kBytes] = tiles[issued % kS];
      for (int i = tid; i < rows * kFullChunks; i += kThreads) {
        const int r = i / kFullChunks, c = i - r * kFullChunks;
        if (c < chunks) cp_async16(&stage[r][16 * c], src + static_cast<size_t>(r) * args.row_bytes + 16 * c);
      }
      if (++issue_tile == tiles_per_row) {
        issue_tile = 0;
        issue_row0 += row_step;
      }
    }
    ++issued;
    cp_async_commit();  // empty groups too: "all but the newest kS - 1" then always means this item
  };

  float acc[kRows][NC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

  // The weights depend on no earlier kernel: the first tiles are requested before
  // waiting for the kernels that produce x (launch_pdl; the wait also keeps out's
  // stores behind every earlier reader).
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) issue_next();
  pdl_wait();
  int tile = 0;
  int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  for (int item = 0; item < items; ++item) {
    issue_next();  // item + kS - 1, into the stage the previous iteration finished with
    const int rows = static_cast<int>(std::min<int64_t>(kRows, args.m - row0));
    const int64_t k0 = static_cast<int64_t>(tile) * kTileElems;
    const bool active = tid < static_cast<int>(std::min<int64_t>(kTileElems, args.k - k0)) / 8;
    // Activations first: their (cached) loads overlap the wait for the tile.
    float xv[NC][8];
    float xsum[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float4 lo = make_float4(0, 0, 0, 0), hi = lo;
      if (active && c < args.n) {
        const float4* xp = reinterpret_cast<const float4*>(args.x + c * args.k + k0 + 8 * tid);
        lo = __ldg(xp);
        hi = __ldg(xp + 1);
      }
      xv[c][0] = lo.x; xv[c][1] = lo.y; xv[c][2] = lo.z; xv[c][3] = lo.w;
      xv[c][4] = hi.x; xv[c][5] = hi.y; xv[c][6] = hi.z; xv[c][7] = hi.w;
      xsum[c] = 0.0f;
      if constexpr (kHasOffset<T>) {
#pragma unroll
        for (int i = 0; i < 8; ++i) xsum[c] += xv[c][i];
      }
    }
    cp_async_wait<kS - 1>();
    __syncthreads();
    if (active) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        float q[8], a, b;
        decode_group<T>(tiles[item % kS][r], tid, q, a, b);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          float s = 0.0f;
#pragma unroll
          for (int i = 0; i < 8; ++i) s = fmaf(q[i], xv[c][i], s);
          if constexpr (kIsFloat<T>) acc[r][c] += s;
          else if constexpr (kHasOffset<T>) acc[r][c] += fmaf(a, s, b * xsum[c]);
          else acc[r][c] = fmaf(a, s, acc[r][c]);
        }
      }
    }
    if (tile == tiles_per_row - 1) {  // the row group is complete: reduce over the block and write
      gemv_block_store<kRows, NC, kThreads / 32>(acc, partial, args, row0, rows);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;
    }
    __syncthreads();  // the next issue refills this stage; the next reduction rewrites partial
    if (++tile == tiles_per_row) {
      tile = 0;
      row0 += row_step;
    }
  }
}

template <DType T, int NC>
void launch_cols(const GemvArgs& a, cudaStream_t stream) {
  const int64_t groups = (a.m + kRows - 1) / kRows;
  const int64_t slots = static_cast<int64_t>(context().sm_count) * kBlocksPerSm<T, NC>;
  const bool persistent = g_kernels == GemvKernels::Persistent || (g_kernels == GemvKernels::Auto && kIsFloat<T>);
  const unsigned grid = static_cast<unsigned>(persistent ? std::min(groups, slots) : groups);
  launch_pdl("gemv_tiled_kernel", gemv_tiled_kernel<T, NC>, dim3(grid), dim3(kThreads), stream, a);
}

template <DType T>
void launch(const GemvArgs& a, cudaStream_t stream) {
  if (a.n == 1) launch_cols<T, 1>(a, stream);
  else launch_cols<T, kGemvMaxCols>(a, stream);
}

}  // namespace

void set_gemv_kernels(GemvKernels k) { g_kernels = k; }

bool gemv_tiled(DType t, const GemvArgs& a, cudaStream_t stream) {
  if (g_kernels == GemvKernels::General) return false;
  // Fast numerics: int8 activations with dp4a for the formats gemv_dp4a.cu handles.
  // Only under Auto, so that forcing Tiled/Persistent still measures the F32 kernels.
  if (g_kernels == GemvKernels::Auto && gemv_dp4a(t, a, stream)) return true;
  const bool aligned = a.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.k % 8 == 0;
  // Items (row groups x tiles) are counted in int.
  const bool fits = a.m / kRows + 1 <= (int64_t{1} << 31) / ((a.k + kTileElems - 1) / kTileElems + 1);
  if (!aligned || !fits || a.n < 1 || a.n > kGemvMaxCols || a.m < 1 || a.k < 1) return false;
  switch (t) {
    case DType::F16: launch<DType::F16>(a, stream); return true;
    case DType::BF16: launch<DType::BF16>(a, stream); return true;
    case DType::Q8_0: launch<DType::Q8_0>(a, stream); return true;
    case DType::Q4_0: launch<DType::Q4_0>(a, stream); return true;
    case DType::Q4_1: launch<DType::Q4_1>(a, stream); return true;
    case DType::Q4_K: launch<DType::Q4_K>(a, stream); return true;
    case DType::Q6_K: launch<DType::Q6_K>(a, stream); return true;
    default: return false;
  }
}

}  // namespace corvid::ops::cuda
