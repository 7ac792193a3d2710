// Decode GEMV with int8 activations (QuantizedMatmul::Fast): x is quantized once per
// call to int8 blocks of 32 values (scale d = max|x| / 127, q = round-half-even(x / d),
// the CPU backend's Q8_0 activation rounding with d kept in F32), and each weight block
// format is dotted with it through __dp4a (4 int8 products and a sum per instruction)
// instead of converting every weight to F32 and FMA-ing it with F32 activations, which
// made gemv_tiled.cu's block-format kernels instruction-bound (~9 instructions a weight).
//
// Memory side: gemv_tiled.cu's pipeline (kRows weight rows per thread block, 16-byte
// cp.async copies of a 2048-value tile into shared memory, the next tile in flight
// while this one is computed, one block per row group). Each thread owns 8 consecutive
// values of the tile (two int8 words of x per activation row) and all kRows rows.
//
// Arithmetic per 8-value group of a weight row, values a * (q - zero) + b with small
// integers q (quant bytes, signed for Q8_0, 0..15 / 0..63 for the nibble formats):
//   sum(w * x) ~= dx * (a * (dot(q, qx) - zero * sum(qx)) + b * sum(qx)),
// dot and sum(qx) exact int32 (dp4a), dx the activation block's scale. The 8 values of
// a group never straddle a 32-value activation block nor a weight (sub-)block's scale.
// Accumulation is F32 across groups, reduced over the block like gemv_tiled.cu.
//
// Numerics: the int8 rounding of x (|error| <= d / 2 per value) changes outputs by
// ~0.3% of their typical size (tests/unit/cuda_dp4a_test.cc states the bounds).
// CORVID_NO_DP4A=1 (read once) turns this path off, for A/B runs.
#include <algorithm>
#include <cstdint>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemv.cuh"
#include "corvid/ops/cuda/int8_out.cuh"
#include "corvid/ops/cuda/pdl.cuh"
#include "corvid/ops/ops.h"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;                  // weight rows per thread block
constexpr int kTileElems = kThreads * 8;  // one 8-value group per thread per row and tile
// Tiles per block in shared memory (one computed, the rest in flight): 2 as gemv_tiled.cu
// measured best for its F32 kernels; CORVID_DP4A_STAGES=4 selects 4 (these kernels need
// fewer instructions per byte, so more bytes in flight may pay; unmeasured as written).
constexpr int kDefaultStages = 2, kDeepStages = 4;
constexpr int kXBlock = 32;               // activation values per int8 scale
constexpr int kOnes = 0x01010101;         // dp4a with this sums 4 int8

template <DType T>
constexpr int kTileBytes = kTileElems / GemvFormat<T>::kElems * GemvFormat<T>::kBytes;
// Formats whose values carry a per-group offset b (a minimum).
template <DType T>
constexpr bool kHasOffset = T == DType::Q4_1 || T == DType::Q4_K;

static_assert(kTileBytes<DType::Q8_0> % 16 == 0 && kTileBytes<DType::Q4_0> % 16 == 0 &&
                  kTileBytes<DType::Q4_1> % 16 == 0 && kTileBytes<DType::Q4_K> % 16 == 0 &&
                  kTileBytes<DType::Q6_K> % 16 == 0,
              "a whole tile must be a run of 16-byte copies");



// An int32 |v| < 2^22 as a float, exactly, with an integer add and a float add instead
// of the (quarter-rate) int-to-float converter: 1.5 * 2^23 + v has v in its mantissa.
__device__ __forceinline__ float small_int_to_float(int v) {
  return __int_as_float(0x4B400000 + v) - 12582912.0f;
}


// x [rows, k] -> qx int8 [rows, k], dx [rows, k / 32]: one warp per 32-value block
// (k % 32 == 0, so blocks never straddle rows). Same rounding as the CPU backend's
// Q8_0 activations: d = amax / 127, q = nearest-even(x * (1 / d)), all IEEE F32.
__global__ void quantize_x_kernel(const float* __restrict__ x, int8_t* __restrict__ qx, float* __restrict__ dx,
                                  int64_t blocks) {
  pdl_launch_dependents();
  const int64_t blk = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (blk >= blocks) return;  // uniform per warp (blockDim is a multiple of 32): the shuffles see full warps
  pdl_wait();  // x comes from the previous kernel; qx/dx may still be read by an earlier GEMV
  const int64_t i = blk * kXBlock + threadIdx.x % 32;
  store_int8(Int8Out{qx, dx}, i, x[i], true);
}

// out[c, row] for c < n <= NC; block b computes rows 4b..4b+3, streaming their tiles
// with kStages - 1 copies in flight.
template <DType T, int NC, int kStages>
__global__ void __launch_bounds__(kThreads, NC == 1 ? 6 : 2)
    gemv_dp4a_kernel(const GemvArgs args, const int8_t* __restrict__ qx, const float* __restrict__ dx) {
  constexpr int kBytes = kTileBytes<T>, kFullChunks = kBytes / 16;
  static_assert((NC == 1 ? 6 : 2) * (kStages * kRows * kBytes + (kThreads / 32) * kRows * NC * 4 + 1024) <= 228 * 1024,
                "the blocks the launch bounds count per SM must fit its shared memory");
  __shared__ __align__(16) uint8_t tiles[kStages][kRows][kBytes];
  __shared__ float partial[kThreads / 32][kRows * NC];
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(std::min(static_cast<int64_t>(kRows), args.m - row0));
  const int tiles_per_row = static_cast<int>((args.k + kTileElems - 1) / kTileElems);
  const uint8_t* wrow0 = args.w + static_cast<size_t>(row0) * args.row_bytes;

  // Copies tile t of the block's rows. Past the last tile it copies nothing but still
  // commits a group, so that "all but the newest kStages - 1 groups done" always
  // means "tile t done" in iteration t.
  // The last tile of a row may be short; its byte count is still a multiple of 16
  // (row_bytes % 16 == 0 and whole tiles are).
  auto issue = [&](int t) {
    if (t < tiles_per_row) {
      const int64_t k0 = static_cast<int64_t>(t) * kTileElems;
      const int elems = static_cast<int>(std::min(static_cast<int64_t>(kTileElems), args.k - k0));
      const int chunks = elems / GemvFormat<T>::kElems * GemvFormat<T>::kBytes / 16;
      const uint8_t* src = wrow0 + static_cast<size_t>(k0 / GemvFormat<T>::kElems) * GemvFormat<T>::kBytes;
      uint8_t(*stage)[kBytes] = tiles[t % kStages];
      for (int i = tid; i < rows * kFullChunks; i += kThreads) {
        const int r = i / kFullChunks, c = i - r * kFullChunks;
        if (c < chunks) cp_async16(&stage[r][16 * c], src + static_cast<size_t>(r) * args.row_bytes + 16 * c);
      }
    }
    cp_async_commit();
  };

  float acc[kRows][NC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

  // The weights depend on no earlier kernel: the first tiles are requested before
  // waiting for the kernel that made x's int8 (launch_pdl).
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  pdl_wait();
  for (int t = 0; t < tiles_per_row; ++t) {
    issue(t + kStages - 1);  // into the stage iteration t - 1 finished with (the __syncthreads below)
    const int64_t k0 = static_cast<int64_t>(t) * kTileElems;
    const bool active = tid < static_cast<int>(std::min(static_cast<int64_t>(kTileElems), args.k - k0)) / 8;
    // Activations first: their (cached) loads overlap the wait for the tile.
    int2 xq[NC];
    float xd[NC];
    [[maybe_unused]] int xs[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      xq[c] = make_int2(0, 0);
      xd[c] = 0.0f;
      xs[c] = 0;
      if (active && c < args.n) {
        const int64_t e = static_cast<int64_t>(c) * args.k + k0 + 8 * tid;  // a multiple of 8
        xq[c] = __ldg(reinterpret_cast<const int2*>(qx + e));
        xd[c] = __ldg(dx + e / kXBlock);
        if constexpr (kHasOffset<T> || group_zero<T> != 0) xs[c] = __dp4a(xq[c].y, kOnes, __dp4a(xq[c].x, kOnes, 0));
      }
    }
    [[maybe_unused]] float xsf[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) xsf[c] = small_int_to_float(xs[c]);
    cp_async_wait<kStages - 1>();
    __syncthreads();
    if (active) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        uint2 v;
        float a, b;
        group_quants<T>(tiles[t % kStages][r], tid, v, a, b);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          int dot = __dp4a(static_cast<int>(v.x), xq[c].x, 0);
          dot = __dp4a(static_cast<int>(v.y), xq[c].y, dot);
          if constexpr (group_zero<T> != 0) dot -= group_zero<T> * xs[c];
          // |dot| <= 8 * 127 * 127 (Q8_0), far inside small_int_to_float's range.
          if constexpr (kHasOffset<T>) {
            acc[r][c] = fmaf(xd[c], fmaf(a, small_int_to_float(dot), b * xsf[c]), acc[r][c]);
          } else {
            acc[r][c] = fmaf(a * xd[c], small_int_to_float(dot), acc[r][c]);
          }
        }
      }
    }
    __syncthreads();  // the next iteration's issue refills this stage
  }

  gemv_block_store<kRows, NC, kThreads / 32>(acc, partial, args, row0, rows);
}

int stages() {
  static const int s = env_int("CORVID_DP4A_STAGES", 0) == 4 ? kDeepStages : kDefaultStages;
  return s;
}

template <DType T, int S>
void launch_stages(const GemvArgs& a, const int8_t* qx, const float* dx, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((a.m + kRows - 1) / kRows);
  auto* kernel = a.n == 1 ? gemv_dp4a_kernel<T, 1, S> : gemv_dp4a_kernel<T, kGemvMaxCols, S>;
  launch_pdl("gemv_dp4a_kernel", kernel, dim3(grid), dim3(kThreads), stream, a, qx, dx);
}

template <DType T>
void launch(const GemvArgs& a, const int8_t* qx, const float* dx, cudaStream_t stream) {
  if (stages() == kDeepStages) launch_stages<T, kDeepStages>(a, qx, dx, stream);
  else launch_stages<T, kDefaultStages>(a, qx, dx, stream);
}

bool dp4a_disabled() {
  static const bool off = env_flag("CORVID_NO_DP4A");
  return off;
}

}  // namespace

Int8Activations quantize_activations(const float* x, int64_t n, int64_t k, cudaStream_t stream) {
  const int64_t values = n * k, blocks = values / kXBlock;
  auto* base = static_cast<uint8_t*>(context().scratch(int8_activation_bytes(values)));
  auto* qx = reinterpret_cast<int8_t*>(base);
  auto* dx = reinterpret_cast<float*>(base + int8_scales_offset(values));
  constexpr int kQuantThreads = 256;  // 8 blocks of 32 per thread block
  launch_pdl("quantize_x_kernel", quantize_x_kernel, dim3(blocks_for(blocks * kXBlock, kQuantThreads)),
             dim3(kQuantThreads), stream, x, qx, dx, blocks);
  return {qx, dx};
}

bool dp4a_enabled() { return !dp4a_disabled(); }

namespace {
uint64_t g_int8_reuses = 0;
}  // namespace

bool gemv_int8_inputs() {
  static const bool off = env_flag("CORVID_NO_FUSED_QUANT");
  return !off && quantized_matmul() == QuantizedMatmul::Fast && !dp4a_disabled() && context().int8_wanted;
}

uint64_t gemv_int8_reuses() { return g_int8_reuses; }

namespace {

// x as int8 for a GEMV that takes them: what the op that produced x wrote along with it
// when it ran just before (no op in between could have changed x since), else quantized
// here. Producers keep writing int8 from now on (Context::int8_wanted).
Int8Activations int8_input(const GemvArgs& a, cudaStream_t stream) {
  Context& ctx = context();
  ctx.int8_wanted = true;
  const Context::Int8Rows& made = ctx.int8_rows;
  const bool reuse = made.describes(a.x, a.n, a.k, ctx.ops_run);
  g_int8_reuses += reuse;
  return reuse ? Int8Activations{made.q, made.d} : quantize_activations(a.x, a.n, a.k, stream);
}

}  // namespace

bool gemv_dp4a_glu_supports(DType t, const GemvArgs& a) {
  static const bool off = env_flag("CORVID_NO_FUSED_SILU");
  return !off && quantized_matmul() == QuantizedMatmul::Fast && !dp4a_disabled() && gemv_direct_glu_supports(t, a);
}

void gemv_dp4a_glu(DType t, const GemvArgs& a, GemvGlu act, cudaStream_t stream) {
  CORVID_CHECK(gemv_dp4a_glu_supports(t, a), "CUDA gemv_dp4a_glu: not for ", dtype_name(t), " here");
  gemv_direct_glu(t, a, int8_input(a, stream), act, stream);
}

bool gemv_dp4a(DType t, const GemvArgs& a, cudaStream_t stream) {
  context().int8_wanted = false;  // until this GEMV takes int8 activations below
  if (quantized_matmul() != QuantizedMatmul::Fast || dp4a_disabled()) return false;
  const bool row_layout = t == DType::Q4_0R || t == DType::Q4_1R || t == DType::Q8_0R || t == DType::Q4_KR;
  if (!row_layout && t != DType::Q8_0 && t != DType::Q4_0 && t != DType::Q4_1 && t != DType::Q4_K && t != DType::Q6_K)
    return false;
  const bool aligned = a.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0 && a.k % kXBlock == 0;
  if (!aligned || a.n < 1 || a.n > kGemvMaxCols || a.m < 1 || a.k < 1 || a.m / kRows >= (int64_t{1} << 31) ||
      a.k / kTileElems >= (int64_t{1} << 30))
    return false;
  const bool direct = gemv_direct_supports(t, a);
  if (row_layout && !direct) return false;
  const Int8Activations x = int8_input(a, stream);
  if (direct) {
    gemv_direct(t, a, x, stream);
    return true;
  }
  switch (t) {
    case DType::Q8_0: launch<DType::Q8_0>(a, x.q, x.d, stream); break;
    case DType::Q4_0: launch<DType::Q4_0>(a, x.q, x.d, stream); break;
    case DType::Q4_1: launch<DType::Q4_1>(a, x.q, x.d, stream); break;
    case DType::Q4_K: launch<DType::Q4_K>(a, x.q, x.d, stream); break;
    case DType::Q6_K: launch<DType::Q6_K>(a, x.q, x.d, stream); break;
    default: fail("CUDA GEMV: no int8 kernel for ", dtype_name(t));
  }
  return true;
}

}  // namespace corvid::ops::cuda
