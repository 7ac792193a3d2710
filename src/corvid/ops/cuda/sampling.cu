// ops::sample_tokens on the GPU (semantics in ops/sampling.h): one block of 1024
// threads per logits row, no sort.
//
//   1. the row is copied to scratch with the penalties applied (one thread per
//      listed token) and divided by the temperature (-0 made +0, so that the
//      order-preserving uint32 image of a value, its "key", orders as floats do);
//   2. the maximum with the lowest id (one 64-bit max of key << 32 | ~id) is the
//      greedy token;
//   3. top-k and top-p cuts are found by radix select over the keys, four 8-bit
//      digits from the top: histograms of counts (top-k) or of probability mass
//      (top-p) over the tokens whose key matches the digits chosen so far. A cut
//      is "every key above K, plus the first `ties` tokens by id of key K" — the
//      CPU's sort order (value descending, id ascending) without sorting;
//   4. min-p keeps tokens whose exp(v - max) >= min_p;
//   5. the draw: each thread owns a contiguous run of token ids; a block-wide
//      exclusive scan of the kept mass per run finds the run, then its thread walks
//      it to where uniform × kept mass falls (token-id order).
//
// Probabilities are exp(v - max) (the top token weighs 1) and masses are summed as
// 64-bit fixed point: integer sums are exact and order-independent, so atomics in
// any order give the same cut and a seed reproduces bit for bit; the resolution
// (2^-44 of the top probability for vocabularies up to 2^18) is far below where the
// CPU's double sums could disagree.
#include <algorithm>
#include <cmath>
#include <vector>

#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"

namespace corvid::ops::cuda {

namespace {

using u64 = unsigned long long;
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr unsigned kFull = 0xffffffffu;

// One row's parameters as the kernel reads them.
struct RowParams {
  double uniform;
  float temperature, top_p, min_p, repetition, presence, frequency;
  int32_t top_k;
  int32_t penalty_begin, penalty_count;  // pairs (id, output count) in the penalty array
  int32_t unused;
};
static_assert(sizeof(RowParams) % sizeof(int32_t) == 0 && sizeof(RowParams) == 48);

struct SharedState {
  u64 hist_weight[kBins];
  unsigned hist_count[kBins];
  u64 reduce[kWarps];
  unsigned sel_bin, sel_count;
  u64 sel_above;
};

// Keeps every key above `key` and the first `ties` tokens (by id) whose key equals it.
// {0, 0} keeps everything: key 0 is a NaN's image, below every valid key.
struct Cut {
  unsigned key = 0, ties = 0;
};

__device__ __forceinline__ unsigned order_key(float v) {  // v not NaN, and not -0
  const unsigned b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float key_value(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// exp(v - top) for v <= top (finite): the difference is exact in double, and the
// part of it a float loses is put back to first order, so the result is within a few
// float ulps of the CPU's double exp without the cost of a double exp per token.
// Explicit roundings (no contraction) so every call site computes the same bits.
__device__ __forceinline__ float prob_weight(float v, float top) {
  const double d = __dsub_rn(static_cast<double>(v), static_cast<double>(top));
  if (!(d > -110.0)) return 0.0f;  // expf underflows to 0 here anyway; -inf lands here too
  const float df = __double2float_rn(d);
  const float rest = __double2float_rn(__dsub_rn(d, static_cast<double>(df)));
  return fminf(__fmul_rn(expf(df), __fadd_rn(1.0f, rest)), 1.0f);
}

__device__ __forceinline__ u64 fixed_weight(float e, float scale) { return __float2ull_rn(__fmul_rn(e, scale)); }

struct SumOp {
  __device__ u64 operator()(u64 a, u64 b) const { return a + b; }
};
struct MaxOp {
  __device__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct MinOp {
  __device__ u64 operator()(u64 a, u64 b) const { return a < b ? a : b; }
};

// The reduction of v over the block, returned to every thread.
template <class Op>
__device__ u64 block_reduce(u64 v, Op op, SharedState& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();  // the previous reduction's readers are done with sh.reduce
  if (threadIdx.x % 32 == 0) sh.reduce[threadIdx.x / 32] = v;
  __syncthreads();
  u64 r = sh.reduce[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, sh.reduce[w]);
  return r;
}

// The sum of v over the threads before this one; total: over all threads.
__device__ u64 block_exclusive_scan(u64 v, SharedState& sh, u64& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  u64 incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 up = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += up;
  }
  __syncthreads();
  if (lane == 31) sh.reduce[warp] = incl;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const u64 s = sh.reduce[w];
    if (w < warp) before += s;
    all += s;
  }
  total = all;
  return before + incl - v;
}

// Warp 0 only: walking the bins from the top, the bin where above + the running
// weight first reaches target (above < target <= above + all bins) -> sh.sel_*.
__device__ void select_bin(SharedState& sh, u64 above, u64 target) {
  const int lane = threadIdx.x;
  const int hi = kBins - 1 - lane * 8;  // this lane's bins: hi, hi - 1, ..., hi - 7
  u64 sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += sh.hist_weight[hi - j];
  u64 incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 up = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += up;
  }
  if (lane == 0) {  // never kept: the invariant makes exactly one lane cross below
    sh.sel_bin = 0;
    sh.sel_above = above;
    sh.sel_count = sh.hist_count[0];
  }
  __syncwarp();
  u64 cum = above + incl - sum;
  if (cum < target && target <= cum + sum) {
    for (int j = 0; j < 8; ++j) {
      const int b = hi - j;
      const u64 w = sh.hist_weight[b];
      if (cum + w >= target) {
        sh.sel_bin = static_cast<unsigned>(b);
        sh.sel_above = cum;
        sh.sel_count = sh.hist_count[b];
        break;
      }
      cum += w;
    }
  }
}

struct Selected {
  unsigned key, count;  // the key where the running total reaches target; tokens with it
  u64 above;            // the total over keys above it
};

// In descending key order, where the running total of token weights (1 each for
// top-k, the fixed-point probability for top-p) first reaches target, 1 <= target <=
// the total over all tokens. Block-wide; every thread gets the result.
template <bool kMass>
__device__ Selected radix_select(const float* vals, int vocab, float top, float scale, u64 target, SharedState& sh) {
  unsigned prefix = 0, mask = 0, count = 0;
  u64 above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      sh.hist_weight[b] = 0;
      sh.hist_count[b] = 0;
    }
    __syncthreads();
    // Consecutive tokens of a thread often share a bin (few distinct top digits):
    // accumulate a run in registers and flush it with one atomic per bin change.
    int run_bin = -1;
    u64 run_weight = 0;
    unsigned run_count = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = vals[i];
      if (isnan(v)) continue;
      const unsigned k = order_key(v);
      if ((k & mask) != prefix) continue;
      const int bin = static_cast<int>((k >> shift) & 0xffu);
      if (bin != run_bin) {
        if (run_bin >= 0) {
          atomicAdd(&sh.hist_weight[run_bin], run_weight);
          atomicAdd(&sh.hist_count[run_bin], run_count);
        }
        run_bin = bin;
        run_weight = 0;
        run_count = 0;
      }
      run_weight += kMass ? fixed_weight(prob_weight(v, top), scale) : 1ull;
      ++run_count;
    }
    if (run_bin >= 0) {
      atomicAdd(&sh.hist_weight[run_bin], run_weight);
      atomicAdd(&sh.hist_count[run_bin], run_count);
    }
    __syncthreads();
    if (threadIdx.x < 32) select_bin(sh, above, target);
    __syncthreads();
    prefix |= sh.sel_bin << shift;
    mask |= 0xffu << shift;
    above = sh.sel_above;
    count = sh.sel_count;
  }
  return {prefix, count, above};
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int vocab, int rows, const RowParams* params, const int32_t* penalties,
                  float* scratch, int32_t* out, float scale) {
  __shared__ SharedState sh;
  const int tid = threadIdx.x;
  float* vals = scratch + static_cast<size_t>(blockIdx.x) * static_cast<size_t>(vocab);
  const int chunk = (vocab + kThreads - 1) / kThreads;  // the draw's run of ids per thread
  const int begin = min(tid * chunk, vocab), end = min(begin + chunk, vocab);

  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowParams p = params[row];
    const float* src = logits + static_cast<size_t>(row) * static_cast<size_t>(vocab);

    // 1. The row with its penalties (Sampler's formulas, rounding step by step).
    for (int i = tid; i < vocab; i += kThreads) vals[i] = src[i];
    const bool repetition = p.repetition != 1.0f;
    const bool output = p.presence != 0.0f || p.frequency != 0.0f;
    if (repetition || output) {
      __syncthreads();
      for (int j = tid; j < p.penalty_count; j += kThreads) {  // distinct ids: no two threads share one
        const int32_t id = penalties[2 * (p.penalty_begin + j)];
        const int32_t count = penalties[2 * (p.penalty_begin + j) + 1];
        float l = vals[id];
        if (repetition) l = l > 0.0f ? __fdiv_rn(l, p.repetition) : __fmul_rn(l, p.repetition);
        if (output && count > 0)
          l = __fsub_rn(l, __fadd_rn(p.presence, __fmul_rn(p.frequency, static_cast<float>(count))));
        vals[id] = l;
      }
    }
    __syncthreads();

    // 2. Temperature; the maximum with the lowest id; how many are not NaN.
    const bool greedy = p.temperature == 0.0f;
    u64 best = 0;
    unsigned valid = 0;
    for (int i = tid; i < vocab; i += kThreads) {
      float v = vals[i];
      if (!greedy) v = __fdiv_rn(v, p.temperature);
      v = __fadd_rn(v, 0.0f);  // -0 becomes +0: they tie, as in the CPU's comparisons
      vals[i] = v;
      if (isnan(v)) continue;
      ++valid;
      best = max(best, (static_cast<u64>(order_key(v)) << 32) | (0xffffffffu - static_cast<unsigned>(i)));
    }
    best = block_reduce(best, MaxOp{}, sh);
    valid = static_cast<unsigned>(block_reduce(valid, SumOp{}, sh));
    if (valid == 0) {
      if (tid == 0) out[row] = -1;  // the host reports it
      continue;
    }
    const int32_t argmax = static_cast<int32_t>(0xffffffffu - static_cast<unsigned>(best & 0xffffffffu));
    const float top = key_value(static_cast<unsigned>(best >> 32));
    // Top-1, or no finite softmax (an infinite maximum, or only -inf): the first in order.
    if (greedy || p.top_k == 1 || !isfinite(top)) {
      if (tid == 0) out[row] = argmax;
      continue;
    }

    // 3. Top-k: the k-th token in (value descending, id ascending) order.
    Cut cut;
    if (p.top_k > 0 && static_cast<unsigned>(p.top_k) < valid) {
      const Selected s = radix_select<false>(vals, vocab, top, scale, static_cast<u64>(p.top_k), sh);
      cut = {s.key, static_cast<unsigned>(static_cast<u64>(p.top_k) - s.above)};
    }

    // 4. Top-p over the top-k survivors: where the running mass of all tokens reaches
    // top_p × the survivors' mass (at or before the end of the survivors).
    if (p.top_p < 1.0f) {
      u64 mass = 0;
      for (int i = tid; i < vocab; i += kThreads) {
        const float v = vals[i];
        if (!isnan(v) && order_key(v) > cut.key) mass += fixed_weight(prob_weight(v, top), scale);
      }
      mass = block_reduce(mass, SumOp{}, sh);
      if (cut.ties) mass += static_cast<u64>(cut.ties) * fixed_weight(prob_weight(key_value(cut.key), top), scale);
      const double wanted = ceil(static_cast<double>(p.top_p) * static_cast<double>(mass));
      const u64 target = std::min(mass, std::max<u64>(1, static_cast<u64>(wanted)));
      const Selected s = radix_select<true>(vals, vocab, top, scale, target, sh);
      const u64 w = fixed_weight(prob_weight(key_value(s.key), top), scale);
      const u64 need = target - s.above;  // > 0: the first `ties` of key s.key bring the mass there
      unsigned ties = w == 0 ? s.count : static_cast<unsigned>(std::min<u64>(s.count, (need + w - 1) / w));
      ties = std::max(ties, 1u);
      if (s.key > cut.key || (s.key == cut.key && ties < cut.ties)) cut = {s.key, ties};
    }

    // 5 + 6. Kept: above the cut (or among its first ties) and, with min-p, exp(v - max)
    // >= min_p. Each thread's run: its ties at the cut key, its other kept mass.
    const float tie_e = cut.ties ? prob_weight(key_value(cut.key), top) : 0.0f;
    const bool ties_pass = cut.ties > 0 && !(p.min_p > 0.0f && tie_e < p.min_p);
    const u64 tie_w = ties_pass ? fixed_weight(tie_e, scale) : 0;
    u64 my_ties = 0, my_mass = 0, my_kept = 0;
    for (int i = begin; i < end; ++i) {
      const float v = vals[i];
      if (isnan(v)) continue;
      const unsigned k = order_key(v);
      if (k < cut.key) continue;
      if (k == cut.key) {
        ++my_ties;
        continue;
      }
      const float e = prob_weight(v, top);
      if (p.min_p > 0.0f && e < p.min_p) continue;
      my_mass += fixed_weight(e, scale);
      ++my_kept;
    }
    u64 all_ties = 0, total = 0;
    const u64 tie_rank = block_exclusive_scan(my_ties, sh, all_ties);  // ties before my run
    const u64 kept_ties =
        ties_pass && cut.ties > tie_rank ? std::min<u64>(my_ties, static_cast<u64>(cut.ties) - tie_rank) : 0;
    my_mass += kept_ties * tie_w;
    my_kept += kept_ties;
    const u64 before = block_exclusive_scan(my_mass, sh, total);
    // The first kept token whose running mass reaches uniform × total (0: the first kept).
    const u64 target = std::min<u64>(total, static_cast<u64>(ceil(p.uniform * static_cast<double>(total))));
    bool mine = false;
    if (target > 0) {
      mine = before < target && target <= before + my_mass;
    } else {
      mine = static_cast<u64>(tid) == block_reduce(my_kept ? static_cast<u64>(tid) : kThreads, MinOp{}, sh);
    }
    if (tid == 0) out[row] = argmax;  // never kept: exactly one thread finds the token
    __syncthreads();
    if (mine) {
      u64 cum = before, rank = tie_rank;
      for (int i = begin; i < end; ++i) {
        const float v = vals[i];
        if (isnan(v)) continue;
        const unsigned k = order_key(v);
        if (k < cut.key) continue;
        u64 w = 0;
        if (k == cut.key) {
          const bool kept = ties_pass && rank < cut.ties;
          ++rank;
          if (!kept) continue;
          w = tie_w;
        } else {
          const float e = prob_weight(v, top);
          if (p.min_p > 0.0f && e < p.min_p) continue;
          w = fixed_weight(e, scale);
        }
        cum += w;
        if (target == 0 || cum >= target) {
          out[row] = i;
          break;
        }
      }
    }
    __syncthreads();  // the next row rewrites vals
  }
}

}  // namespace

void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out) {
  Context& c = context();
  const int vocab = static_cast<int>(logits.cols());
  const int n = static_cast<int>(rows.size());
  std::vector<RowParams> params(rows.size());
  std::vector<int32_t> pairs;
  for (size_t r = 0; r < rows.size(); ++r) {
    const TokenSampling& t = rows[r];
    RowParams& p = params[r];
    p = RowParams{t.uniform, t.temperature, t.top_p, t.min_p, t.repetition_penalty, t.presence_penalty,
                  t.frequency_penalty, t.top_k, static_cast<int32_t>(pairs.size() / 2),
                  static_cast<int32_t>(t.penalty_ids.size()), 0};
    for (size_t j = 0; j < t.penalty_ids.size(); ++j) {
      pairs.push_back(t.penalty_ids[j]);
      pairs.push_back(t.output_counts[j]);
    }
  }
  if (pairs.empty()) pairs = {0, 0};  // a real upload either way
  const auto* d_params = reinterpret_cast<const RowParams*>(c.upload(
      UploadSlot::SamplingRows,
      std::span<const int32_t>(reinterpret_cast<const int32_t*>(params.data()), params.size() * sizeof(RowParams) / 4)));
  const int32_t* d_pairs = c.upload(UploadSlot::SamplingPenalties, pairs);

  // One block per SM at most, each with its own row of scratch, looping over rows.
  const int grid = std::max(1, std::min(n, c.sm_count));
  const size_t out_bytes = (rows.size() * sizeof(int32_t) + 255) & ~size_t{255};
  char* scratch = static_cast<char*>(c.scratch(out_bytes + static_cast<size_t>(grid) * static_cast<size_t>(vocab) * 4));
  auto* d_out = reinterpret_cast<int32_t*>(scratch);
  // Fixed point with 2^S per unit of the top probability: a row's total stays below 2^63.
  int bits = 0;
  while ((int64_t{1} << bits) < vocab) ++bits;
  const float scale = std::ldexp(1.0f, std::min(44, 63 - bits));
  sample_kernel<<<static_cast<unsigned>(grid), kThreads, 0, c.stream>>>(
      logits.ptr<float>(), vocab, n, d_params, d_pairs, reinterpret_cast<float*>(scratch + out_bytes), d_out, scale);
  CORVID_CUDA_LAUNCHED("sample_kernel");
  CORVID_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out, rows.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, c.stream));
  CORVID_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  for (int r = 0; r < n; ++r)
    if (out[static_cast<size_t>(r)] < 0) fail("ops::sample_tokens: row ", r, ": all logits are NaN");
}

namespace {

// One thread per (row, token): clears what the row's mask does not allow.
__global__ void mask_logits_kernel(float* logits, int64_t vocab, const int32_t* rows, const int32_t* masks,
                                   int64_t words) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= vocab) return;
  const int64_t i = blockIdx.y;
  const uint32_t word = static_cast<uint32_t>(masks[i * words + t / 32]);
  if (!((word >> (t % 32)) & 1u)) logits[static_cast<int64_t>(rows[i]) * vocab + t] = -INFINITY;
}

}  // namespace

void mask_logits(const Tensor& logits, std::span<const int32_t> rows, std::span<const int32_t> masks) {
  Context& c = context();
  const int64_t vocab = logits.cols(), words = (vocab + 31) / 32;
  std::vector<int32_t> packed(rows.begin(), rows.end());  // rows, then the masks: one upload
  packed.insert(packed.end(), masks.begin(), masks.end());
  const int32_t* d = c.upload(UploadSlot::TokenMasks, packed);
  mask_logits_kernel<<<dim3(blocks_for(vocab, kThreads), static_cast<unsigned>(rows.size())), kThreads, 0, c.stream>>>(
      logits.ptr<float>(), vocab, d, d + rows.size(), words);
  CORVID_CUDA_LAUNCHED("mask_logits_kernel");
}

}  // namespace corvid::ops::cuda
