// The Fast-mode prefill kernels on the GPU: the tensor-core GEMM (gemm_tc.cu) and
// the FlashAttention-style attention (attention_prefill.cu). Runs only in builds
// with -DCORVID_CUDA=ON and skips when no GPU is present.
//
// Tolerances:
// - GEMM: the only intended difference from the exact product is rounding x and the
//   decoded weights to 16 bits (f16 for f16 weights and the block formats, else bf16). The result must equal a
//   float64 product of the rounded operands within 1e-5 x sum|x_i w_i| (fp32
//   accumulation order), so a wrong tile, row or operand type fails.
// - attention: q, k, v and the probabilities are rounded to bf16. The result must be
//   within 1e-2 (relative to max |reference|) of the fp32 kernel (Exact mode) — a
//   masking or tiling error moves outputs by their own magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/half.h"
#include "corvid/core/env.h"
#include "corvid/ops/cuda/attention_prefill.cuh"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/gemm_cublaslt.cuh"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::attention_gpu_vs_cpu;
using testing::f32_tensor;
using testing::to_gpu;
using testing::NumericsScope;
using testing::rel_err;
using testing::to_host;
using testing::make_weight;
using testing::random_floats;
using testing::weight_values;


float round16(float v, bool f16) { return f16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v)); }

TEST(CudaPrefill, TensorCoreGemmEqualsProductOfRoundedOperands) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  // The GPU row layouts (Q4_0R, Q4_1R, Q8_0R, Q4_KR: what upload makes of 16-byte-row
  // Q4_0/Q4_1/Q8_0/Q4_K) are rearranged from their GGUF blocks; they and Q4_K take the
  // eight-at-a-time decoder.
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K,
                  DType::Q4_0R, DType::Q4_1R, DType::Q8_0R, DType::Q4_KR}) {
    for (int64_t n : {16, 67}) {
      const int64_t m = 77, k = 512;
      const DType stored = ops::stored_weight_dtype(t);
      OwnedTensor w = make_weight(stored, m, k, random_floats(static_cast<size_t>(m * k), 21));
      const auto xv = random_floats(static_cast<size_t>(n * k), 22);
      const auto bv = random_floats(static_cast<size_t>(m), 23);
      OwnedTensor x = f32_tensor({n, k}, xv), bias = f32_tensor({m}, bv);
      DeviceTensor gw = testing::weight_to_gpu(w.tensor, t), gx = to_gpu(x.tensor), gb = to_gpu(bias.tensor);
      DeviceTensor g_out(Device::CUDA, DType::F32, {n, m});
      ops::matmul(gx.tensor, gw.tensor, g_out.tensor, &gb.tensor);
      const auto got = to_host(g_out.tensor);
      const bool f16 = t == DType::F16 || is_quantized(t);  // the GEMM's operand type (gemm_tc.cu)
      // The weights as the GEMM rounds them (Q4_K: testing::prompt_gemm_weights_f16).
      const auto wv = f16 ? testing::prompt_gemm_weights_f16(w.tensor) : weight_values(w.tensor);
      double worst = 0;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < m; ++c) {
          double sum = 0, mag = 0;
          for (int64_t i = 0; i < k; ++i) {
            const double p = static_cast<double>(round16(xv[static_cast<size_t>(r * k + i)], f16)) *
                             round16(wv[static_cast<size_t>(c * k + i)], f16);
            sum += p;
            mag += std::abs(p);
          }
          sum += bv[static_cast<size_t>(c)];
          const double err = std::abs(got[static_cast<size_t>(r * m + c)] - sum) / (mag + 1e-30);
          worst = std::max(worst, err);
          ASSERT_LE(err, 1e-5) << dtype_name(t) << " n=" << n << " row " << r << " col " << c;
        }
      std::printf("cuda prefill gemm %-5s n=%-3lld max err / sum|x w| = %.3g\n", std::string(dtype_name(t)).c_str(),
                  static_cast<long long>(n), worst);
    }
  }
}

// A bias on 16-bit weights: cuBLASLt adds an F32 bias in its epilogue; a BF16 bias, or an
// F32 one not 16-byte aligned, is added after the GEMM. All three must give the product
// plus the bias (the bias as stored), with the same tolerance as above.
TEST(CudaPrefill, BiasInTheEpilogueOrAfterIt) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  const int64_t n = 40, m = 96, k = 256;
  enum class Bias { F32, BF16, F32Unaligned };
  for (DType t : {DType::BF16, DType::F16}) {
    for (Bias kind : {Bias::F32, Bias::BF16, Bias::F32Unaligned}) {
      OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 31));
      const auto xv = random_floats(static_cast<size_t>(n * k), 32);
      auto bv = random_floats(static_cast<size_t>(m + 1), 33);
      if (kind == Bias::BF16)
        for (float& b : bv) b = bf16_to_f32(f32_to_bf16(b));
      OwnedTensor x = f32_tensor({n, k}, xv);
      DeviceTensor gw = to_gpu(w.tensor), gx = to_gpu(x.tensor);
      // F32Unaligned: the bias starts one float into its buffer (4-byte aligned only).
      DeviceTensor gb_f32 = to_gpu(f32_tensor({m + 1}, bv).tensor);
      std::vector<uint16_t> b16(bv.size());
      for (size_t i = 0; i < bv.size(); ++i) b16[i] = f32_to_bf16(bv[i]);
      DeviceTensor gb_bf16(Device::CUDA, DType::BF16, {m + 1});
      copy_bytes(gb_bf16.tensor.data, Device::CUDA, b16.data(), Device::CPU, b16.size() * 2);
      const int64_t offset = kind == Bias::F32Unaligned ? 1 : 0;
      const Tensor bias = kind == Bias::BF16 ? Tensor(DType::BF16, {m}, gb_bf16.tensor.data, Device::CUDA)
                                             : Tensor(DType::F32, {m}, gb_f32.tensor.ptr<float>() + offset, Device::CUDA);
      DeviceTensor g_out(Device::CUDA, DType::F32, {n, m});
      const uint64_t epilogues = ops::cuda::lt_gemm_bias_epilogues();
      ops::matmul(gx.tensor, gw.tensor, g_out.tensor, &bias);
      const auto got = to_host(g_out.tensor);
      // Only the aligned F32 bias goes to the epilogue (unless CORVID_NO_CUBLASLT=1).
      const bool epilogue = kind == Bias::F32 && !env_flag("CORVID_NO_CUBLASLT");
      EXPECT_EQ(ops::cuda::lt_gemm_bias_epilogues() - epilogues, epilogue ? 1u : 0u) << dtype_name(t);
      const bool f16 = t == DType::F16;
      const auto wv = weight_values(w.tensor);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < m; ++c) {
          double sum = bv[static_cast<size_t>(c + offset)], mag = std::abs(sum);
          for (int64_t i = 0; i < k; ++i) {
            const double p = static_cast<double>(round16(xv[static_cast<size_t>(r * k + i)], f16)) *
                             wv[static_cast<size_t>(c * k + i)];
            sum += p;
            mag += std::abs(p);
          }
          ASSERT_LE(std::abs(got[static_cast<size_t>(r * m + c)] - sum) / mag, 1e-5)
              << dtype_name(t) << " bias kind " << static_cast<int>(kind) << " row " << r << " col " << c;
        }
    }
  }
}

// f16 operands (f16 and block-format weights) saturate at 65504 instead of becoming inf
// (half_out.cuh half_bits): activations of 1e5 give the product of the clamped values,
// finite, where an inf operand would make the whole output row inf or NaN.
TEST(CudaPrefill, F16OperandsSaturateInsteadOfOverflowing) {
  SKIP_WITHOUT_GPU();
  NumericsScope fast(ops::QuantizedMatmul::Fast);
  for (DType t : {DType::F16, DType::Q4_0R}) {
    const int64_t n = 20, m = 128, k = 256;
    const DType stored = ops::stored_weight_dtype(t);
    OwnedTensor w = make_weight(stored, m, k, random_floats(static_cast<size_t>(m * k), 51));
    auto xv = random_floats(static_cast<size_t>(n * k), 52);
    for (int64_t r = 0; r < n; ++r) xv[static_cast<size_t>(r * k + r)] = r % 2 ? 1e5f : -1e5f;  // one per row
    OwnedTensor x = f32_tensor({n, k}, xv);
    DeviceTensor gw = testing::weight_to_gpu(w.tensor, t), gx = to_gpu(x.tensor);
    DeviceTensor g_out(Device::CUDA, DType::F32, {n, m});
    ops::matmul(gx.tensor, gw.tensor, g_out.tensor);
    const auto got = to_host(g_out.tensor);
    const auto wv = testing::prompt_gemm_weights_f16(w.tensor);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        double sum = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const float xi = std::clamp(xv[static_cast<size_t>(r * k + i)], -65504.0f, 65504.0f);
          const double p = static_cast<double>(round16(xi, true)) * wv[static_cast<size_t>(c * k + i)];
          sum += p;
          mag += std::abs(p);
        }
        const float g = got[static_cast<size_t>(r * m + c)];
        ASSERT_TRUE(std::isfinite(g)) << dtype_name(t) << " token " << r << " row " << c;
        ASSERT_LE(std::abs(g - sum) / (mag + 1e-30), 1e-5) << dtype_name(t) << " token " << r << " row " << c;
      }
  }
}

struct AttentionCase {
  const char* name;
  int64_t capacity;
  std::vector<int32_t> positions;
};

std::vector<int32_t> range(int32_t first, int32_t count) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Sets the prefill attention's row tiles a warp for one scope (restored even when a
// check throws).
struct RowsScope {
  explicit RowsScope(int rows) : before(ops::cuda::attention_prefill_rows()) {
    ops::cuda::set_attention_prefill_rows(rows);
  }
  ~RowsScope() { ops::cuda::set_attention_prefill_rows(before); }
  RowsScope(const RowsScope&) = delete;
  RowsScope& operator=(const RowsScope&) = delete;
  int before;
};

TEST(CudaPrefill, FlashAttentionMatchesFp32Kernel) {
  SKIP_WITHOUT_GPU();
  std::vector<AttentionCase> cases = {
      {"prompt 0..149", 150, range(0, 150)},
      {"chunk 100..299 after a cached prefix", 300, range(100, 200)},
      {"one tile, 16 queries", 16, range(0, 16)},
  };
  std::vector<int32_t> shuffled = range(0, 97);
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
  cases.push_back({"shuffled positions", 97, shuffled});
  // 96: Phi-3; 512: Gemma 4's full layers (two warps a row tile, 32-key tiles).
  for (int64_t head_dim : {64, 96, 128, 256, 512}) {
    for (int64_t window : {0, 40}) {
      for (const AttentionCase& c : cases) {
        const int64_t n = static_cast<int64_t>(c.positions.size()), n_heads = 8, n_kv = 2, cap = c.capacity;
        OwnedTensor q = f32_tensor({n, n_heads, head_dim}, random_floats(static_cast<size_t>(n * n_heads * head_dim), 31));
        OwnedTensor k = f32_tensor({cap, n_kv, head_dim}, random_floats(static_cast<size_t>(cap * n_kv * head_dim), 32));
        OwnedTensor v = f32_tensor({cap, n_kv, head_dim}, random_floats(static_cast<size_t>(cap * n_kv * head_dim), 33));
        DeviceTensor gq = to_gpu(q.tensor), gk = to_gpu(k.tensor), gv = to_gpu(v.tensor);
        DeviceTensor exact_out(Device::CUDA, DType::F32, {n, n_heads, head_dim});
        DeviceTensor fast_out(Device::CUDA, DType::F32, {n, n_heads, head_dim});
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        {
          NumericsScope exact(ops::QuantizedMatmul::Exact);
          ops::attention(gq.tensor, gk.tensor, gv.tensor, c.positions, scale, window, exact_out.tensor);
        }
        const auto ref = to_host(exact_out.tensor);
        // A warp takes one 16-row query tile or two (sharing each K/V fragment): the same
        // MMAs and softmax per row, so the two agree to float rounding.
        std::vector<float> got[2];
        for (int rows : {1, 2}) {
          const RowsScope tiles(rows);
          ops::attention(gq.tensor, gk.tensor, gv.tensor, c.positions, scale, window, fast_out.tensor);
          got[rows - 1] = to_host(fast_out.tensor);
          const double err = rel_err(got[rows - 1], ref.data(), ref.size());  // infinite on a non-finite output
          std::printf("cuda prefill attention d=%lld window=%lld rows=%d %-38s rel err %.3g\n",
                      static_cast<long long>(head_dim), static_cast<long long>(window), rows, c.name, err);
          EXPECT_LE(err, 1e-2) << c.name << " head_dim " << head_dim << " window " << window << " rows " << rows;
        }
        EXPECT_LE(rel_err(got[1], got[0].data(), got[0].size()), 1e-6) << c.name << " head_dim " << head_dim;
      }
    }
  }
}

// Decode attention (attention_decode.cu: key tiles of 32, split-KV once the cache holds
// more than one tile, one block per GQA group) is fp32 throughout, so it must equal the
// CPU within 1e-5 (relative to max |cpu|): head sizes 64/128/256 (512, Gemma 4's full
// layers, takes attention.cu's split kernel at most 4 heads a block), groups of 1, 4 and 8
// query heads per kv head, windows, positions at tile edges, a cache of one tile (one
// split: the output is written without the combine pass) and longer ones (up to 99
// splits, some of them without keys).
TEST(CudaDecodeAttention, SplitKvMatchesCpu) {
  SKIP_WITHOUT_GPU();
  struct Heads {
    int64_t q, kv;
  };
  for (int64_t head_dim : {64, 128, 256, 512}) {
    for (const Heads heads : {Heads{4, 4}, Heads{8, 2}, Heads{16, 2}}) {
      for (int64_t cap : {24, 40, 1024, 2000}) {
        for (int64_t window : {0, 300}) {
          const std::vector<int32_t> positions = cap == 24     ? std::vector<int32_t>{0, 7, 23}
                                                 : cap == 40   ? std::vector<int32_t>{0, 31, 32, 39}
                                                 : cap == 1024 ? std::vector<int32_t>{0, 5, 33, 700, 1023}
                                                               : std::vector<int32_t>{0, 5, 31, 32, 33, 700, 1999};
          EXPECT_LE(attention_gpu_vs_cpu(heads.q, heads.kv, head_dim, cap, positions, window, 41), 1e-5)
              << "head_dim " << head_dim << " heads " << heads.q << "/" << heads.kv << " cache " << cap << " window "
              << window;
        }
      }
    }
  }
}

// The same kernels over an F16 or BF16 cache (the default on a GPU): the CPU reads the
// same rounded values in F32, so the only difference is still fp32 rounding (1e-5); the
// fp32 kernels of attention.cu (head_dim 32, 96, 512) and the tensor-core prefill kernel
// (32 queries, 2e-2 as above) read 16-bit caches too.
TEST(CudaDecodeAttention, HalfPrecisionCachesMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType kv : {DType::BF16, DType::F16}) {
    for (int64_t head_dim : {32, 64, 96, 128, 256, 512}) {
      for (int64_t cap : {40, 2000}) {
        const std::vector<int32_t> positions = cap == 40 ? std::vector<int32_t>{0, 31, 32, 39}
                                                         : std::vector<int32_t>{0, 33, 700, 1999};
        EXPECT_LE(attention_gpu_vs_cpu(8, 2, head_dim, cap, positions, 0, 43, kv), 1e-5)
            << dtype_name(kv) << " head_dim " << head_dim << " cache " << cap;
      }
    }
    for (int64_t head_dim : {64, 96, 128, 256, 512}) {
      std::vector<int32_t> prompt(32);
      std::iota(prompt.begin(), prompt.end(), 100);
      EXPECT_LE(attention_gpu_vs_cpu(8, 2, head_dim, 200, prompt, 0, 45, kv), 2e-2)
          << dtype_name(kv) << " tensor-core prefill, head_dim " << head_dim;
    }
  }
}

// The fused residual add + norm of the decode step equals the CPU's add then rms_norm
// (fp32, same formula): 1e-5 relative, for x and for the normed output. Decode rows run
// on a cluster of blocks (norm_cluster.cu), prompts one block a row (float4 loads up to
// 8192 wide, scalar past that and for odd widths);
// out may be y (the model passes one buffer for both). The cluster has the 2, 4 or 8
// blocks the decode GEMVs ask for (Context::norm_cluster_blocks), more for wide rows.
TEST(CudaOpsFused, AddRmsNormMatchesCpu) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  uint32_t seed = 51;
  ops::cuda::Context& ctx = ops::cuda::context();
  const int default_blocks = ctx.norm_cluster_blocks;
  for (int blocks : {8, 4, 2}) {
    for (Shape s : {Shape{3, 4096}, Shape{1, 4096}, Shape{1, 576}, Shape{2, 8192}, Shape{1, 16384}, Shape{1, 258},
                    Shape{100, 4096}, Shape{70, 8192}, Shape{70, 576}, Shape{70, 10000}, Shape{1, 20000}}) {
      if (blocks != 8 && (s.rows > 64 || s.cols > 8192)) continue;  // prompts and wide rows: covered with 8
      ctx.norm_cluster_blocks = blocks;
      const size_t count = static_cast<size_t>(s.rows * s.cols);
      for (DType wt : {DType::F32, DType::F16, DType::BF16}) {
        for (bool out_is_y : {false, true}) {
          const auto xv = random_floats(count, seed++), yv = random_floats(count, seed++);
          OwnedTensor x = f32_tensor({s.rows, s.cols}, xv), y = f32_tensor({s.rows, s.cols}, yv);
          OwnedTensor w = make_weight(wt, 1, s.cols, random_floats(static_cast<size_t>(s.cols), seed++));
          const Tensor w1 = w.tensor.reshaped({s.cols});
          OwnedTensor out(DType::F32, {s.rows, s.cols});
          DeviceTensor gx = to_gpu(x.tensor), gy = to_gpu(y.tensor), gw = to_gpu(w1);
          DeviceTensor gout(Device::CUDA, DType::F32, {s.rows, s.cols});
          ops::add_rms_norm(x.tensor, y.tensor, w1, 1e-5f, out.tensor);
          ops::add_rms_norm(gx.tensor, gy.tensor, gw.tensor, 1e-5f, out_is_y ? gy.tensor : gout.tensor);
          EXPECT_LE(rel_err(to_host(gx.tensor), x.ptr<float>(), count), 1e-5) << s.rows << "x" << s.cols;
          EXPECT_LE(rel_err(to_host(out_is_y ? gy.tensor : gout.tensor), out.ptr<float>(), count), 1e-5)
              << s.rows << "x" << s.cols << " " << dtype_name(wt) << (out_is_y ? " out = y" : "") << ", cluster of "
              << blocks;
        }
      }
    }
  }
  ctx.norm_cluster_blocks = default_blocks;
}

}  // namespace
}  // namespace corvid
