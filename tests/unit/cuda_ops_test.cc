// CUDA ops against the CPU ops (the reference backend) on random data. Runs only
// in builds with -DCORVID_CUDA=ON and skips when no GPU is present.
//
// Tolerances (max |cuda - cpu| relative to max |cpu|, per op):
// - embedding, add: 1e-6 (the same decode / the same single rounding).
// - rope, rms_norm, silu_mul: 1e-5 (same formulas; libm vs CUDA math rounding and
//   reduction order differ).
// - matmul, float weights: 1e-5 (fp32 accumulate in another order).
// - matmul, block-quantized weights: the CPU quantizes activations to 8 bits (Q8_0/
//   Q8_1/Q8_K, as llama.cpp does) and the GPU does not, so the CPU result is compared
//   with a float64 dot of the dequantized weights with unquantized activations: the
//   GPU must be within 1e-5 of that, and the CPU within 2e-2 (activation rounding).
// - attention, softmax: 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::attention_gpu_vs_cpu;
using testing::f32_tensor;
using testing::to_gpu;
using testing::rel_err;
using testing::to_host;
using testing::make_weight;
using testing::random_floats;
using testing::weight_values;

TEST(CudaOps, Embedding) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t vocab = 37, d = 512;
    OwnedTensor table = make_weight(t, vocab, d, random_floats(static_cast<size_t>(vocab * d), 1));
    const std::vector<int32_t> ids = {0, 36, 5, 5, 17};
    OwnedTensor cpu_out(DType::F32, {5, d});
    ops::embedding(table.tensor, ids, cpu_out.tensor);
    DeviceTensor g_table = to_gpu(table.tensor), g_out(Device::CUDA, DType::F32, {5, d});
    ops::embedding(g_table.tensor, ids, g_out.tensor);
    EXPECT_LE(rel_err(to_host(g_out.tensor), cpu_out.ptr<float>(), 5 * d), 1e-6) << dtype_name(t);
  }
}

// Reference: float64 dot of the dequantized weight with unquantized x.
std::vector<float> matmul_ref(const std::vector<float>& x, const std::vector<float>& w, int64_t n, int64_t m, int64_t k) {
  std::vector<float> out(static_cast<size_t>(n * m));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < m; ++c) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x[static_cast<size_t>(r * k + i)]) * w[static_cast<size_t>(c * k + i)];
      out[static_cast<size_t>(r * m + c)] = static_cast<float>(s);
    }
  return out;
}

TEST(CudaOps, MatmulEveryWeightDtypeAndBatch) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    // n = 1 and 3 take the GEMV, 8 its widest form, 19 the dequantize + SGEMM path.
    for (int64_t n : {1, 3, 8, 19}) {
      const int64_t m = 77, k = 512;
      OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 2));
      const auto xv = random_floats(static_cast<size_t>(n * k), 3);
      const auto bv = random_floats(static_cast<size_t>(m), 4);
      OwnedTensor x = f32_tensor({n, k}, xv), bias = f32_tensor({m}, bv), cpu_out(DType::F32, {n, m});
      ops::matmul(x.tensor, w.tensor, cpu_out.tensor, &bias.tensor);
      std::vector<float> ref = matmul_ref(xv, weight_values(w.tensor), n, m, k);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < m; ++c) ref[static_cast<size_t>(r * m + c)] += bv[static_cast<size_t>(c)];
      DeviceTensor gw = to_gpu(w.tensor), gx = to_gpu(x.tensor), gb = to_gpu(bias.tensor);
      DeviceTensor g_out(Device::CUDA, DType::F32, {n, m});
      // Exact numerics: n = 19 takes the fp32 SGEMM path (the Fast tensor-core path is
      // tested in cuda_prefill_test.cc).
      ops::set_quantized_matmul(ops::QuantizedMatmul::Exact);
      ops::matmul(gx.tensor, gw.tensor, g_out.tensor, &gb.tensor);
      ops::set_quantized_matmul(ops::QuantizedMatmul::Fast);
      const auto got = to_host(g_out.tensor);
      EXPECT_LE(rel_err(got, ref.data(), ref.size()), 1e-5) << dtype_name(t) << " n=" << n;
      const std::vector<float> cpu(cpu_out.ptr<float>(), cpu_out.ptr<float>() + n * m);
      EXPECT_LE(rel_err(cpu, ref.data(), ref.size()), is_quantized(t) ? 2e-2 : 1e-5) << dtype_name(t) << " n=" << n;
    }
  }
}

TEST(CudaOps, MatmulOddFloatRowsAndNoBias) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t n = 2, m = 9, k = 30;  // k not a multiple of the 16-byte vector: scalar GEMV
    OwnedTensor w = make_weight(t, m, k, random_floats(static_cast<size_t>(m * k), 5));
    OwnedTensor x = f32_tensor({n, k}, random_floats(static_cast<size_t>(n * k), 6)), cpu_out(DType::F32, {n, m});
    ops::matmul(x.tensor, w.tensor, cpu_out.tensor);
    DeviceTensor gw = to_gpu(w.tensor), gx = to_gpu(x.tensor), g_out(Device::CUDA, DType::F32, {n, m});
    ops::matmul(gx.tensor, gw.tensor, g_out.tensor);
    EXPECT_LE(rel_err(to_host(g_out.tensor), cpu_out.ptr<float>(), n * m), 1e-5) << dtype_name(t);
  }
}

// rms_norm takes a warp per row up to 256 columns (per-head q/k norms: head_dim 64 or
// 128, many rows) and a block per row beyond (hidden sizes: one decode row of 4096).
// Both paths, in place and not, with each weight dtype.
TEST(CudaOps, RmsNormPerHeadAndWideRows) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  for (Shape shape : {Shape{96, 64}, Shape{40, 128}, Shape{9, 256}, Shape{1, 257}, Shape{1, 4096}, Shape{5, 4096},
                      Shape{2, 10000}, Shape{80, 4096}, Shape{70, 1000}, Shape{70, 10000}}) {
    const int64_t rows = shape.rows, cols = shape.cols;
    const size_t count = static_cast<size_t>(rows * cols);
    OwnedTensor x = f32_tensor({rows, cols}, random_floats(count, 17));
    for (DType wt : {DType::F32, DType::F16, DType::BF16}) {
      OwnedTensor w = make_weight(wt, 1, cols, random_floats(static_cast<size_t>(cols), 18));
      Tensor w1 = w.tensor.reshaped({cols});
      OwnedTensor cpu_out(DType::F32, {rows, cols});
      ops::rms_norm(x.tensor, w1, 1e-5f, cpu_out.tensor);
      DeviceTensor gx = to_gpu(x.tensor), gw = to_gpu(w1), g_out(Device::CUDA, DType::F32, {rows, cols});
      ops::rms_norm(gx.tensor, gw.tensor, 1e-5f, g_out.tensor);
      EXPECT_LE(rel_err(to_host(g_out.tensor), cpu_out.ptr<float>(), count), 1e-5)
          << rows << "x" << cols << " " << dtype_name(wt);
      ops::rms_norm(gx.tensor, gw.tensor, 1e-5f, gx.tensor);
      EXPECT_LE(rel_err(to_host(gx.tensor), cpu_out.ptr<float>(), count), 1e-5)
          << rows << "x" << cols << " " << dtype_name(wt) << " in place";
    }
  }
}

TEST(CudaOps, RmsNormSiluMulAddSoftmax) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 13, cols = 576;
  const size_t count = static_cast<size_t>(rows * cols);
  OwnedTensor x = f32_tensor({rows, cols}, random_floats(count, 7)), y = f32_tensor({rows, cols}, random_floats(count, 8));
  for (DType wt : {DType::F32, DType::F16, DType::BF16}) {
    OwnedTensor w = make_weight(wt, 1, cols, random_floats(static_cast<size_t>(cols), 9));
    Tensor w1 = w.tensor.reshaped({cols});
    OwnedTensor cpu_out(DType::F32, {rows, cols});
    ops::rms_norm(x.tensor, w1, 1e-5f, cpu_out.tensor);
    DeviceTensor gx = to_gpu(x.tensor), gw = to_gpu(w1);
    ops::rms_norm(gx.tensor, gw.tensor, 1e-5f, gx.tensor);  // in place, as the model does for q/k norms
    EXPECT_LE(rel_err(to_host(gx.tensor), cpu_out.ptr<float>(), count), 1e-5) << dtype_name(wt);
  }
  {
    OwnedTensor cpu_out(DType::F32, {rows, cols});
    ops::silu_mul(x.tensor, y.tensor, cpu_out.tensor);
    DeviceTensor gx = to_gpu(x.tensor), gy = to_gpu(y.tensor), g_out(Device::CUDA, DType::F32, {rows, cols});
    ops::silu_mul(gx.tensor, gy.tensor, g_out.tensor);
    EXPECT_LE(rel_err(to_host(g_out.tensor), cpu_out.ptr<float>(), count), 1e-5);
  }
  {
    DeviceTensor gx = to_gpu(x.tensor), gy = to_gpu(y.tensor);
    ops::add(gx.tensor, gy.tensor);
    OwnedTensor cx = f32_tensor({rows, cols}, std::vector<float>(x.ptr<float>(), x.ptr<float>() + count));
    ops::add(cx.tensor, y.tensor);
    EXPECT_LE(rel_err(to_host(gx.tensor), cx.ptr<float>(), count), 1e-6);
  }
  {
    auto big = random_floats(static_cast<size_t>(3 * 49152), 10, 8.0f);
    for (int i = 0; i < 49152; ++i) big[static_cast<size_t>(2 * 49152 + i)] = -INFINITY;  // all -inf row -> zeros
    OwnedTensor cs = f32_tensor({3, 49152}, big);
    DeviceTensor gs = to_gpu(cs.tensor);
    ops::softmax(cs.tensor);
    ops::softmax(gs.tensor);
    EXPECT_LE(rel_err(to_host(gs.tensor), cs.ptr<float>(), big.size()), 1e-5);
  }
}

TEST(CudaOps, RopeLayoutsAndPartialRotary) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 5, heads = 3, head_dim = 64;
  const std::vector<int32_t> positions = {0, 1, 7, 300, 4095};
  for (bool interleaved : {false, true}) {
    for (int rotary_dim : {64, 32}) {
      ops::RopeParams p;
      p.rotary_dim = rotary_dim;
      p.interleaved = interleaved;
      p.attention_factor = 1.17f;
      for (int i = 0; i < rotary_dim / 2; ++i)
        p.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / rotary_dim)));
      const auto xv = random_floats(static_cast<size_t>(n * heads * head_dim), 11);
      OwnedTensor x = f32_tensor({n, heads, head_dim}, xv);
      DeviceTensor gx = to_gpu(x.tensor);
      ops::rope(x.tensor, positions, p);
      ops::rope(gx.tensor, positions, p);
      EXPECT_LE(rel_err(to_host(gx.tensor), x.ptr<float>(), xv.size()), 1e-5)
          << "interleaved " << interleaved << " rotary_dim " << rotary_dim;
    }
  }
}

// The values of a GPU tensor of F32, F16 or BF16, as floats.
std::vector<float> cache_to_host(const Tensor& dev) {
  if (dev.dtype == DType::F32) return to_host(dev);
  std::vector<uint16_t> bits(static_cast<size_t>(dev.numel()));
  Tensor h = dev;
  h.device = Device::CPU;
  h.data = bits.data();
  copy_tensor(h, dev);
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = dev.dtype == DType::F16 ? f16_to_f32(bits[i]) : bf16_to_f32(bits[i]);
  return out;
}

// The fused decode-step store: rope of q and k and the cache rows of k and v, against
// the CPU's rope + row copies (rotate-half and interleaved, partial rotary, a padding
// row that stores nothing, rows out of order), into F32, BF16 and F16 caches. In a
// 16-bit cache the values are the CPU's rounded to nearest even: v bit for bit, k
// within the 16-bit rounding (its rope differs from the CPU's by float rounding).
TEST(CudaOps, RopeStoreKvMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t head_dim = 64, cache_rows = 24;
  // 4 tokens (decode: one head a thread) and 20 (a prompt: a thread rotates one pair of
  // 8 heads, q then k; 6 + 3 heads mix q and k in one group and leave the next short).
  for (const int64_t n : {4, 20})
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {6, 3}})
  for (DType cache_dtype : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<int32_t> positions, rows;
    for (int64_t t = 0; t < n; ++t) {
      positions.push_back(t == 3 ? 4095 : static_cast<int32_t>(t * 37));
      rows.push_back(t == 2 ? -1 : static_cast<int32_t>(t * 7 % cache_rows));  // out of order, one padding row
    }
    for (bool interleaved : {false, true}) {
      for (int rotary_dim : {64, 32}) {
        ops::RopeParams p;
        p.rotary_dim = rotary_dim;
        p.interleaved = interleaved;
        for (int i = 0; i < rotary_dim / 2; ++i)
          p.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / rotary_dim)));
        const auto qv = random_floats(static_cast<size_t>(n * heads * head_dim), 21);
        const auto kv = random_floats(static_cast<size_t>(n * kv_heads * head_dim), 22);
        const auto vv = random_floats(static_cast<size_t>(n * kv_heads * head_dim), 23);
        const auto cache0 = random_floats(static_cast<size_t>(cache_rows * kv_heads * head_dim), 24);
        OwnedTensor q = f32_tensor({n, heads, head_dim}, qv), k = f32_tensor({n, kv_heads, head_dim}, kv);
        OwnedTensor v = f32_tensor({n, kv_heads, head_dim}, vv);
        OwnedTensor kc = f32_tensor({cache_rows, kv_heads, head_dim}, cache0);
        OwnedTensor vc = f32_tensor({cache_rows, kv_heads, head_dim}, cache0);
        DeviceTensor gq = to_gpu(q.tensor), gk = to_gpu(k.tensor), gv = to_gpu(v.tensor);
        DeviceTensor gkc = testing::kv_to_gpu(kc, cache_dtype), gvc = testing::kv_to_gpu(vc, cache_dtype);
        ops::rope_store_kv(q.tensor, k.tensor, v.tensor, positions, p, rows, kc.tensor, vc.tensor);
        ops::rope_store_kv(gq.tensor, gk.tensor, gv.tensor, positions, p, rows, gkc.tensor, gvc.tensor);
        const std::string where = std::to_string(n) + " tokens, " + std::to_string(heads) + "+" +
                                  std::to_string(kv_heads) + " heads " +
                                  std::string(dtype_name(cache_dtype)) + " interleaved " +
                                  std::to_string(interleaved) + " rotary_dim " + std::to_string(rotary_dim);
        EXPECT_LE(rel_err(to_host(gq.tensor), q.ptr<float>(), qv.size()), 1e-5) << where;
        EXPECT_LE(rel_err(to_host(gk.tensor), k.ptr<float>(), kv.size()), 1e-5) << where;
        // The CPU's caches hold F32: round what it stored as the GPU's dtype does.
        testing::round_to_kv_dtype(kc, cache_dtype);
        testing::round_to_kv_dtype(vc, cache_dtype);
        const double k_tol = cache_dtype == DType::F32 ? 1e-5 : cache_dtype == DType::BF16 ? 1e-2 : 2e-3;
        EXPECT_LE(rel_err(cache_to_host(gkc.tensor), kc.ptr<float>(), cache0.size()), k_tol) << where;
        // Values are copied (and rounded), not computed: bit for bit; the padding row's slot untouched.
        EXPECT_EQ(cache_to_host(gvc.tensor), std::vector<float>(vc.ptr<float>(), vc.ptr<float>() + cache0.size()))
            << where;
      }
    }
  }
}

TEST(CudaOps, AttentionGqaWindowHeadDims) {
  SKIP_WITHOUT_GPU();
  for (int64_t head_dim : {16, 32, 64, 128, 256, 384, 512}) {
    for (int64_t window : {0, 16}) {
      const std::vector<int32_t> positions = {0, 3, 15, 16, 100, 149};
      EXPECT_LE(attention_gpu_vs_cpu(8, 2, head_dim, 150, positions, window, 12), 1e-5)
          << "head_dim " << head_dim << " window " << window;
    }
  }
}

// Gemma 4's geometries (the fixture's full layers: 4 query heads over 1 KV head of 32;
// sliding: 4 over 2 of 16; the real models' 256 and 512) with each cache dtype: F32 as
// exact as the CPU, 16-bit within their rounding.
TEST(CudaOps, AttentionGemma4GeometriesEveryCacheDtype) {
  SKIP_WITHOUT_GPU();
  const std::vector<int32_t> positions = {0, 1, 7, 8, 30, 59};
  for (const auto& [kv_heads, head_dim] :
       {std::pair<int64_t, int64_t>{1, 32}, {2, 16}, {2, 256}, {1, 512}, {2, 512}}) {
    for (int64_t window : {0, 16}) {
      EXPECT_LE(attention_gpu_vs_cpu(4, kv_heads, head_dim, 60, positions, window, 5), 1e-5)
          << kv_heads << "x" << head_dim << " window " << window;
      for (DType kv : {DType::BF16, DType::F16})
        EXPECT_LE(attention_gpu_vs_cpu(4, kv_heads, head_dim, 60, positions, window, 5, kv), 1e-2)
            << kv_heads << "x" << head_dim << " window " << window << " " << dtype_name(kv);
    }
  }
}

TEST(CudaOps, Im2col1dEqualsCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t t_in = 3000, channels = 80, kernel = 3;
  OwnedTensor x = f32_tensor({t_in, channels}, random_floats(static_cast<size_t>(t_in * channels), 31));
  DeviceTensor gx = to_gpu(x.tensor);
  for (int64_t stride : {1, 2}) {
    const int64_t t_out = (t_in + 2 - kernel) / stride + 1;
    OwnedTensor cpu_out(DType::F32, {t_out, channels * kernel});
    DeviceTensor g_out(Device::CUDA, DType::F32, {t_out, channels * kernel});
    ops::im2col_1d(x.tensor, kernel, stride, 1, cpu_out.tensor);
    ops::im2col_1d(gx.tensor, kernel, stride, 1, g_out.tensor);
    EXPECT_EQ(rel_err(to_host(g_out.tensor), cpu_out.ptr<float>(), static_cast<size_t>(t_out * channels * kernel)), 0.0)
        << stride;
  }
}

TEST(CudaOps, MixedDevicesAreAnError) {
  SKIP_WITHOUT_GPU();
  OwnedTensor x = f32_tensor({2, 8}, random_floats(16, 15));
  DeviceTensor gy = to_gpu(x.tensor);
  EXPECT_THROW(ops::add(x.tensor, gy.tensor), corvid::Error);
}

}  // namespace
}  // namespace corvid
