// Prompt GEMM on Hopper's warpgroup MMA (wgmma) that reads the block formats' GPU row
// layouts (Q4_0R, Q4_1R, Q8_0R, Q4_KR) itself: out[n, m] = x[n, k] @ w[m, k]^T, x the f16
// operand, fp32 accumulation and output.
//
// Why: gemm_tensor_cores decodes a block-format matrix into a 16-bit tile for cuBLAS,
// which writes and reads back 2 bytes a weight: for the 8B model ~5 ms a prompt, and
// Q4_0 prefill ran at 72% of BF16's speed at 512 tokens (docs/benchmarks.md). Here the
// weights travel as their 4.5-8.5 bits and are decoded in registers right before the
// MMA that uses them, as Machete (vLLM) does: wgmma takes its A operand from registers,
// so the decoded weights never touch memory.
//
// Shape of the work: a block of 2 warpgroups (256 threads) computes 128 weight rows x
// kN tokens (128 or 256); warpgroup g owns weight rows 64g..64g+63 and issues
// wgmma.m64nNk16 (wgmma.cuh) with
//   A (64 rows x 16 k, registers): its weight rows, decoded from shared memory into the
//     fragment layout, each value rounded to f16 exactly as the tile decoder does, so
//     only the summation order differs from the cuBLAS path;
//   B (16 k x kN tokens, shared memory): the x tile, token rows of 64 k (128 bytes) in
//     the 128-byte swizzle.
// The k loop runs in 64-wide stages (two 32-value quant blocks), kStages buffers deep.
// Thread 0 asks TMA (tma.cuh) for a stage's x tile, quants and scales three stages ahead,
// counted on the buffer's mbarrier. A warpgroup decodes block 1 of a stage while the
// MMAs of block 0 run and block 0 of the next stage while those of block 1 run; each of
// the four fragment sets is rewritten only after the MMAs that read it completed.
// What bounds it is how fast the warps issue the decoder's instructions between the
// MMAs (ncu, first version: the tensor pipe 55% busy, 0.27 instructions a cycle a
// scheduler): hence TMA instead of per-thread copies (a stage went from ~245 to ~140
// instructions for most warps; 2048 tokens: 530 -> 695 TFLOP/s on gate_up), f16
// arithmetic in the decoder (Q4_0R: 2.5 instructions a value) and 256 tokens a block
// where the grid allows (each decoded fragment feeds twice the MMAs).
#include <cuda_fp16.h>

#include <algorithm>

#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemm_wgmma.cuh"
#include "corvid/ops/cuda/gemv.cuh"
#include "corvid/ops/cuda/ptx.cuh"
#include "corvid/ops/cuda/quant.cuh"
#include "corvid/ops/cuda/tma.cuh"
#include "corvid/ops/cuda/wgmma.cuh"

namespace corvid::ops::cuda {

namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kRows = 128;     // weight rows a block (64 a warpgroup)
constexpr int kDepth = 64;     // k a stage (one 128-byte swizzle row of f16)
constexpr int kStages = 4;

// Bytes of one weight row's 64 values (quants, then scales: two blocks of 32), and the
// shared memory of a stage. Q4_KR's "scales" are the 16-byte super-block headers behind
// the row's quants: 2 bytes a 32-value sub-block, a header every four stages.
template <DType T, int kN>
struct Layout {
  static constexpr bool kSuperBlocks = T == DType::Q4_KR;
  static constexpr int kBlockQuants = T == DType::Q8_0R ? 32 : 16;
  static constexpr int kBlockScale = T == DType::Q4_1R ? 4 : 2;  // f16 d (and f16 m); Q4_KR: 16 / 8
  static constexpr int kQuants = 2 * kBlockQuants;
  static constexpr int kScales = 2 * kBlockScale;
  // Shared-memory pitch of a row's quants: TMA copies 16 bytes more than the stage's (of
  // the next stage, unused), which puts the 8 rows a warp reads at once on different banks.
  static constexpr int kPitch = kQuants + 16;
  // A row's scales: the 16-byte aligned window that holds the stage's (TMA copies from
  // 16-byte aligned addresses, 16 bytes at least; the rest of the window is unused).
  static constexpr int kScalePitch = 16;
  static_assert(kScales <= kScalePitch, "a stage's scales must fit TMA's 16-byte row");
  static_assert(!kSuperBlocks || 8 * kBlockScale == kScalePitch, "a Q4_KR header (16 bytes) serves 8 sub-blocks");
  static constexpr int kX = kN * kDepth * 2;  // the x tile, first (1024-byte aligned)
  static constexpr int kQuantTile = kRows * kPitch, kScaleTile = kRows * kScalePitch;
  static constexpr int kStage = (kX + kQuantTile + kScaleTile + 1023) / 1024 * 1024;
  static constexpr int kShared = kStages * kStage + 1024;  // + room to align the base
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int kN>
__device__ __forceinline__ void wgmma_tile(float (&acc)[kN / 2], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (kN == 256) {
    wgmma_f16_m64n256k16(acc, a, b);
  } else {
    wgmma_f16_m64n128k16(acc, a, b);
  }
}

// Quants as f16 without a conversion instruction: a field of bits at 0..7 under the
// exponent of 1024 reads as 1024 + field (f16's spacing there is 1), and two such
// halves make an f16 pair. The exponent patterns travel in registers (Magic): with
// both constants immediate, the mask-and-insert would take two LOP3 instructions
// instead of one. `zero` is a kernel argument (0), so that the compiler cannot fold them
// back into immediates.
struct Magic {
  uint32_t nibbles, bytes;  // f16 pairs under 1024: 4-bit and 8-bit fields
  __device__ __forceinline__ explicit Magic(uint32_t zero)
      : nibbles(0x64006400u + zero), bytes(0x64806480u + zero) {}
};
__device__ __forceinline__ __half2 as_half2(uint32_t v) { return *reinterpret_cast<const __half2*>(&v); }
__device__ __forceinline__ uint32_t as_bits(__half2 v) { return *reinterpret_cast<const uint32_t*>(&v); }

// The A fragments of quant block b (values 32b..32b+31 of the stage: k16 steps 2b, into
// lo, and 2b + 1, into hi) for rows r and r + 8 of the tile (this lane's): pairs c, c + 1
// and c + 8, c + 9 of each 16 k (c = 2 (lane % 4)). Each value is the f16 the tile
// decoder (gemm_tc.cu) makes of it: Q4_0R and Q8_0R d * (q - z) rounded once (q - z is
// exact in f16 and so is d, so one __hmul2 rounds the exact product, as the tile's
// float product rounded to f16 does); Q4_1R and Q4_KR a * q + z in f16, one __hfma2
// (quant.cuh affine_quant_f16).
// Q4_KR: scales is the row's super-block header (d, dmin, 6-bit scales and minimums) and
// sub the sub-block (0..7) block 0 of the stage is.
template <DType T, int kN>
__device__ __forceinline__ void decode_block(const uint8_t* quants, const uint8_t* scales, int b, int sub, int r,
                                             int c, const Magic& k, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  using L = Layout<T, kN>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows r, r + 8: fragment registers h and h + 2
    const int row = r + 8 * h;
    const uint8_t* q = quants + row * L::kPitch + b * L::kBlockQuants;
    // The block's f16 d (and Q4_1R's m right behind it); Q4_KR reads its header below.
    const uint8_t* s = scales + row * L::kScalePitch + b * L::kBlockScale;
    // Bytes c, c + 8, c + 1, c + 9 (in that order): the values of pair (c, c + 1) then
    // sit 16 bits apart, those of (c + 8, c + 9) 8 bits above them.
    const uint32_t w = __byte_perm(load_u16(q + c), load_u16(q + c + 8), 0x5140);
    if constexpr (T == DType::Q4_1R || T == DType::Q4_KR) {
      // a q + z in f16 pairs, one rounding (quant.cuh affine_quant_f16): Q4_1R a = d,
      // z = m; Q4_KR a = f16(d sc), z = f16(-dmin mn). 1024 + q - 1024 = q, exact.
      __half2 a, z;
      if constexpr (T == DType::Q4_1R) {
        a = as_half2(static_cast<uint32_t>(load_u16(s)) * 0x10001u);
        z = as_half2(static_cast<uint32_t>(load_u16(s + 2)) * 0x10001u);
      } else {
        const uint4 header = *reinterpret_cast<const uint4*>(scales + row * L::kScalePitch);  // d, dmin, scales
        uint32_t sc, mn;
        k_scale_min_words(header.y, header.z, header.w, sub + b, sc, mn);
        const __half2 az = k_affine_f16(half_to_float(static_cast<uint16_t>(header.x & 0xFFFF)),
                                        half_to_float(static_cast<uint16_t>(header.x >> 16)), small_uint_to_float(sc),
                                        small_uint_to_float(mn));
        a = __low2half2(az);
        z = __high2half2(az);
      }
      const __half2 offset = __float2half2_rn(1024.0f);
      auto pair = [&](uint32_t x) {
        return as_bits(__hfma2(__hsub2(as_half2((x & 0x000F000Fu) | k.nibbles), offset), a, z));
      };
      // Low nibbles: step 2b; high nibbles: step 2b + 1.
      lo[h] = pair(w);
      lo[h + 2] = pair(w >> 8);
      hi[h] = pair(w >> 4);
      hi[h + 2] = pair(w >> 12);
    } else {
      const __half2 d = as_half2(static_cast<uint32_t>(load_u16(s)) * 0x10001u);
      if constexpr (T == DType::Q8_0R) {
        // Byte j is value j (int8); its sign bit flipped, under 1024: 1152 + q.
        const uint32_t v = __byte_perm(load_u16(q + c + 16), load_u16(q + c + 24), 0x5140);
        const __half2 z = __float2half2_rn(1152.0f);
        auto pair = [&](uint32_t x) {
          return as_bits(__hmul2(__hsub2(as_half2((x & 0x00FF00FFu) ^ k.bytes), z), d));
        };
        lo[h] = pair(w);
        lo[h + 2] = pair(w >> 8);
        hi[h] = pair(v);
        hi[h + 2] = pair(v >> 8);
      } else {
        // Low nibbles: step 2b; high nibbles: step 2b + 1. 1024 + q - 1032 = q - 8.
        const __half2 z = __float2half2_rn(1032.0f);
        auto pair = [&](uint32_t x) {
          return as_bits(__hmul2(__hsub2(as_half2((x & 0x000F000Fu) | k.nibbles), z), d));
        };
        lo[h] = pair(w);
        lo[h + 2] = pair(w >> 8);
        hi[h] = pair(w >> 4);
        hi[h + 2] = pair(w >> 12);
      }
    }
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <DType T, int kN>
__global__ void __launch_bounds__(kThreads, kN == 128 ? 2 : 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap quant_map,
                      const __grid_constant__ CUtensorMap scale_map, float* __restrict__ out, int n, int m, int k,
                      uint32_t zero) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<T, kN>;
  extern __shared__ uint8_t shared_raw[];
  // The swizzle pattern is anchored to 1024-byte boundaries.
  const uint32_t raw_address = smem_address(shared_raw);
  const uint32_t base = (raw_address + 1023) & ~1023u;
  uint8_t* shared = shared_raw + (base - raw_address);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;  // warps 0-3: warpgroup 0
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int token0 = blockIdx.y * kN;
  const int stages_total = k / kDepth;

  // A stage comes by TMA: thread 0 asks for the x tile (rows past n arrive as zeros),
  // the weight rows' quants and their scales, all counted on the buffer's barrier.
  __shared__ __align__(8) uint64_t ready[kStages];
  auto bar = [&](int buffer) { return smem_address(&ready[buffer]); };
  if (tid == 0) {
    for (int b = 0; b < kStages; ++b) mbarrier_init(bar(b), 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  auto load_stage = [&](int kt) {
    if (tid != 0) return;
    const int buffer = kt % kStages;
    const uint32_t stage = base + buffer * L::kStage;
    mbarrier_arrive_expect_bytes(bar(buffer), L::kX + L::kQuantTile + L::kScaleTile);
    tma_load_tile(stage, &x_map, kt * kDepth, token0, bar(buffer));
    tma_load_tile(stage + L::kX, &quant_map, kt * L::kQuants, static_cast<int>(row0), bar(buffer));
    tma_load_tile(stage + L::kX + L::kQuantTile, &scale_map, (kt * L::kScales) & ~15, static_cast<int>(row0),
                  bar(buffer));
  };
  // The buffer's (kt / kStages)-th stage has landed.
  auto wait_stage = [&](int kt) { mbarrier_wait(bar(kt % kStages), (kt / kStages) & 1); };

  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  const Magic magic(zero);
  // The fragments of a stage's four k16 steps.
  uint32_t a[4][4];
  const int r = (warp % 4) * 16 + (warp / 4) * 64 + lane / 4;  // this lane's first tile row
  const int c = 2 * (lane % 4);
  // Stage kt's quants, and its scales in its buffer's window (see load_stage); Q4_KR: the
  // header, which is the whole window, and the stage's first sub-block.
  auto quants_of = [&](int kt) { return shared + (kt % kStages) * L::kStage + L::kX; };
  auto scales_of = [&](int kt) {
    return quants_of(kt) + L::kQuantTile + (L::kSuperBlocks ? 0 : (kt * L::kScales) & 15);
  };
  auto sub_of = [&](int kt) { return (2 * kt) % 8; };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < stages_total) load_stage(s);
  wait_stage(0);
  decode_block<T, kN>(quants_of(0), scales_of(0), 0, sub_of(0), r, c, magic, a[0], a[1]);
  // A stage: block 0's two MMAs (decoded before), block 1 decoded while they run (once
  // the previous stage's block-1 MMAs, which read a[2] and a[3], are done), its MMAs;
  // then, past a barrier that every thread reaches after the MMAs of the stage before
  // this one, that stage's buffer is refilled three stages ahead, the next stage's tiles
  // are awaited on their mbarrier, and its block 0 is decoded once this stage's block-0
  // MMAs are done, while those of block 1 run.
  for (int kt = 0; kt < stages_total; ++kt) {
    const uint64_t desc = swizzled_tile_descriptor(base + (kt % kStages) * L::kStage);
    wgmma_fence();
    wgmma_tile<kN>(acc, a[0], desc);
    wgmma_tile<kN>(acc, a[1], desc + 2);
    wgmma_commit();
    wgmma_wait<1>();
    decode_block<T, kN>(quants_of(kt), scales_of(kt), 1, sub_of(kt), r, c, magic, a[2], a[3]);
    wgmma_fence();
    wgmma_tile<kN>(acc, a[2], desc + 4);
    wgmma_tile<kN>(acc, a[3], desc + 6);
    wgmma_commit();
    if (kt + 1 < stages_total) {
      // Every thread is past the MMAs of stage kt - 1: its buffer may be refilled.
      __syncthreads();
      if (kt + kStages - 1 < stages_total) load_stage(kt + kStages - 1);
      wait_stage(kt + 1);
      wgmma_wait<1>();
      decode_block<T, kN>(quants_of(kt + 1), scales_of(kt + 1), 0, sub_of(kt + 1), r, c, magic, a[0], a[1]);
    }
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) fence_operand(acc[i]);

  // Accumulator i: tokens 8 (i / 4) + c (+1 for odd i), weight row r (+8 for i % 4 >= 2).
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    const int token = token0 + 8 * (i / 4) + c + (i % 2);
    const int64_t row = row0 + r + 8 * ((i % 4) / 2);
    if (token < n) out[static_cast<int64_t>(token) * m + row] = acc[i];
  }
#else
  // Compiled without sm_90a (the compute_90 PTX, JIT-compiled where the sm_90a code does
  // not run): fail the launch loudly rather than leave out unwritten.
  __trap();
#endif
}

// CORVID_FUSED_GEMM=0: never (the tile path, A/B runs), 2: wherever it can run.
FusedGemm initial_mode() {
  const int v = env_int("CORVID_FUSED_GEMM", 1);
  return v == 0 ? FusedGemm::Never : v == 2 ? FusedGemm::Always : FusedGemm::Auto;
}
FusedGemm g_mode = initial_mode();
uint64_t g_calls = 0;

// Tokens a block. 128 while that gives no SM more than one block: such a block finishes
// in about half the time of a 256-token one. Past that 256, one block an SM: each decoded
// fragment then feeds twice the MMAs, and that wins even with SMs left idle (H200, 512
// tokens: o_proj 38.3 us with 128 against 46.8 with 256; qkv (96 blocks of 256 or 192
// of 128) 49.2 against 64.0; docs/benchmarks.md). CORVID_WGMMA_TOKENS=128|256 forces one
// (A/B runs).
int g_forced_tokens = env_int("CORVID_WGMMA_TOKENS", 0);

int64_t blocks_of_128(int64_t n, int64_t m) { return (m / kRows) * ((n + 127) / 128); }

int tokens_per_block(const Context& ctx, int64_t n, int64_t m) {
  if (g_forced_tokens == 128 || g_forced_tokens == 256) return g_forced_tokens;
  return blocks_of_128(n, m) <= ctx.sm_count ? 128 : 256;
}

template <DType T, int kN>
void launch(Context& ctx, const uint16_t* x, const uint8_t* w, int64_t row_bytes, float* out, int64_t n, int64_t m,
            int64_t k) {
  using L = Layout<T, kN>;
  auto* kernel = gemm_wgmma_kernel<T, kN>;
  static const bool configured = [kernel] {
    CORVID_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kShared));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(m / kRows), static_cast<unsigned>((n + kN - 1) / kN));
  const CUtensorMap x_map = tma_matrix_16bit(x, n, k, kN);
  const int64_t units = k / 32;
  const CUtensorMap quant_map = tma_matrix_bytes(w, m, units * L::kBlockQuants, row_bytes, L::kPitch, kRows);
  const CUtensorMap scale_map =
      tma_matrix_bytes(w + units * L::kBlockQuants, m, units * L::kBlockScale, row_bytes, L::kScalePitch, kRows);
  kernel<<<grid, kThreads, L::kShared, ctx.stream>>>(x_map, quant_map, scale_map, out, static_cast<int>(n),
                                                     static_cast<int>(m), static_cast<int>(k), 0u);
  CORVID_CUDA_LAUNCHED("gemm_wgmma_kernel");
}

template <DType T>
void launch(Context& ctx, const uint16_t* x, const uint8_t* w, int64_t row_bytes, float* out, int64_t n, int64_t m,
            int64_t k) {
  if (tokens_per_block(ctx, n, m) == 256) {
    launch<T, 256>(ctx, x, w, row_bytes, out, n, m, k);
  } else {
    launch<T, 128>(ctx, x, w, row_bytes, out, n, m, k);
  }
}

}  // namespace

void set_fused_gemm(FusedGemm mode) { g_mode = mode; }
FusedGemm fused_gemm() { return g_mode; }
void set_fused_gemm_tokens(int tokens) { g_forced_tokens = tokens; }
int fused_gemm_tokens() { return g_forced_tokens; }
uint64_t gemm_quantized_wgmma_calls() { return g_calls; }
bool gemm_quantized_wgmma_runs_here() { return context().sm90; }

bool gemm_quantized_wgmma_supported(const Context& ctx, DType t, const void* w, int64_t row_bytes, int64_t n,
                                    int64_t m, int64_t k) {
  if (g_mode == FusedGemm::Never || !ctx.sm90) return false;
  if (t != DType::Q4_0R && t != DType::Q4_1R && t != DType::Q8_0R && t != DType::Q4_KR) return false;
  if (m % kRows != 0 || k % kDepth != 0 || row_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0)
    return false;
  // (The grid's y dimension, token tiles, is at most 65535.)
  if (n < 1 || (n + 127) / 128 > 65535 || m > INT32_MAX || k < kDepth || k > INT32_MAX) return false;
  // A grid of under 3/4 of the SMs leaves too many idle that cuBLAS on the f16 tile uses
  // (a block's time does not shrink with fewer tokens).
  return g_mode == FusedGemm::Always || 4 * blocks_of_128(n, m) >= 3 * ctx.sm_count;
}

void gemm_quantized_wgmma(Context& ctx, DType t, const uint16_t* x, const uint8_t* w, int64_t row_bytes, float* out,
                          int64_t n, int64_t m, int64_t k) {
  ++g_calls;
  switch (t) {
    case DType::Q4_0R: launch<DType::Q4_0R>(ctx, x, w, row_bytes, out, n, m, k); return;
    case DType::Q4_1R: launch<DType::Q4_1R>(ctx, x, w, row_bytes, out, n, m, k); return;
    case DType::Q8_0R: launch<DType::Q8_0R>(ctx, x, w, row_bytes, out, n, m, k); return;
    case DType::Q4_KR: launch<DType::Q4_KR>(ctx, x, w, row_bytes, out, n, m, k); return;
    default: fail("CUDA gemm_quantized_wgmma: unsupported weight dtype ", dtype_name(t));
  }
}

}  // namespace corvid::ops::cuda
