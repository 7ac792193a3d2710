// Row-wise and elementwise ops against double-precision references:
// embedding, rms_norm, rope (both layouts, partial rotary, attention factor),
// silu_mul, matmul_glu, add, softmax, im2col_1d; argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/ops/ops.h"
#include "ops_test_util.h"

namespace corvid::ops {
namespace {

using namespace corvid::testing;

TEST(Embedding, LooksUpDequantizedRows) {
  const int64_t vocab = 10, d = 64;
  const auto src = random_floats(vocab * d, 1);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_1}) {
    OwnedTensor table = make_weight(t, vocab, d, src);
    const std::vector<float> values = weight_values(table.tensor);
    std::vector<int32_t> ids = {3, 0, 9, 3};
    OwnedTensor out(DType::F32, {4, d});
    embedding(table.tensor, ids, out.tensor);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(out.ptr<float>() + i * d, values.data() + ids[i] * d, d)) << dtype_name(t);
    }
    std::vector<int32_t> bad = {10};
    OwnedTensor out1(DType::F32, {1, d});
    EXPECT_THROW(embedding(table.tensor, bad, out1.tensor), Error);
  }
}

TEST(RmsNorm, MatchesReferenceAndAliases) {
  const int64_t rows = 5, cols = 576;
  const auto x = random_floats(rows * cols, 2, 4.0f);
  const auto w = random_floats(cols, 3);
  OwnedTensor xt = f32_tensor({rows, cols}, x), wt = f32_tensor({cols}, w), out(DType::F32, {rows, cols});
  const float eps = 1e-5f;
  rms_norm(xt.tensor, wt.tensor, eps, out.tensor);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < cols; ++i) ss += static_cast<double>(x[r * cols + i]) * x[r * cols + i];
    const double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (int64_t i = 0; i < cols; ++i) {
      const double ref = x[r * cols + i] * inv * w[i];
      ASSERT_NEAR(out.ptr<float>()[r * cols + i], ref, 1e-5 * (1 + std::fabs(ref)));
    }
  }
  // In place and with a BF16 weight.
  OwnedTensor wb(DType::BF16, {cols});
  for (int64_t i = 0; i < cols; ++i) wb.ptr<uint16_t>()[i] = f32_to_bf16(w[i]);
  rms_norm(xt.tensor, wb.tensor, eps, xt.tensor);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float wi = bf16_to_f32(f32_to_bf16(w[i % cols]));
    ASSERT_NEAR(xt.ptr<float>()[i], out.ptr<float>()[i] / w[i % cols] * wi,
                1e-4 * (1 + std::fabs(out.ptr<float>()[i])));
  }
  OwnedTensor bad_w(DType::F32, {cols - 1});
  EXPECT_THROW(rms_norm(xt.tensor, bad_w.tensor, eps, out.tensor), Error);
}

void check_rope(bool interleaved, int rotary_dim, float factor) {
  const int64_t n = 3, heads = 2, head_dim = 16;
  const auto x = random_floats(n * heads * head_dim, 4);
  OwnedTensor xt = f32_tensor({n, heads, head_dim}, x);
  RopeParams p;
  p.rotary_dim = rotary_dim;
  p.interleaved = interleaved;
  p.attention_factor = factor;
  for (int i = 0; i < rotary_dim / 2; ++i) p.inv_freq.push_back(std::pow(10000.0f, -2.0f * i / rotary_dim));
  std::vector<int32_t> pos = {0, 7, 1000};
  rope(xt.tensor, pos, p);
  const int half = rotary_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x.data() + (t * heads + h) * head_dim;
      const float* got = xt.ptr<float>() + (t * heads + h) * head_dim;
      std::vector<double> ref(in, in + head_dim);
      for (int i = 0; i < half; ++i) {
        const double theta = static_cast<double>(static_cast<float>(pos[t]) * p.inv_freq[i]);
        const double c = std::cos(theta) * factor, s = std::sin(theta) * factor;
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        ref[a] = in[a] * c - in[b] * s;
        ref[b] = in[b] * c + in[a] * s;
      }
      for (int64_t c = 0; c < head_dim; ++c) {
        ASSERT_NEAR(got[c], ref[c], 1e-5 * (1 + std::fabs(ref[c])))
            << "interleaved=" << interleaved << " rot=" << rotary_dim << " t=" << t << " c=" << c;
      }
    }
  }
}

TEST(Rope, RotateHalfAndInterleavedPartialAndScaled) {
  check_rope(false, 16, 1.0f);
  check_rope(true, 16, 1.0f);
  check_rope(false, 8, 1.0f);  // partial rotary: dims 8..15 untouched
  check_rope(true, 8, 1.2f);
}

TEST(Rope, SamePositionNewFrequenciesIsNotServedStale) {
  // rope caches cos/sin of the last position; different frequencies or factor must recompute.
  std::vector<int32_t> pos = {5};
  for (float factor : {1.0f, 0.5f}) {
    for (float base : {10000.0f, 500.0f}) {  // same position and factor, new frequencies
      OwnedTensor x = f32_tensor({1, 1, 4}, {1, 1, 0, 0});  // rotate-half pairs (x0, x2), (x1, x3)
      RopeParams p;
      p.rotary_dim = 4;
      p.attention_factor = factor;
      p.inv_freq = {1.0f, 1.0f / base};
      rope(x.tensor, pos, p);
      const float theta0 = 5.0f * p.inv_freq[0];
      EXPECT_NEAR(x.ptr<float>()[0], std::cos(theta0) * factor, 1e-6) << base << " " << factor;
      EXPECT_NEAR(x.ptr<float>()[2], std::sin(theta0) * factor, 1e-6) << base << " " << factor;
      const float theta1 = 5.0f * p.inv_freq[1];
      EXPECT_NEAR(x.ptr<float>()[3], std::sin(theta1) * factor, 1e-6) << base << " " << factor;
    }
  }
}

// rope_store_kv = rope(q), rope(k), then k and v into the cache rows named by `rows`
// (-1: nowhere); the rest of the cache is untouched. Partial rotary, so that the
// unrotated tail of k is stored too.
TEST(RopeStoreKv, EqualsRopeThenRowCopies) {
  const int64_t n = 3, heads = 4, kv_heads = 2, head_dim = 16, cache_rows = 6;
  RopeParams p;
  p.rotary_dim = 8;
  p.inv_freq = {1.0f, 0.1f, 0.01f, 0.001f};
  const std::vector<int32_t> positions = {2, 9, 40}, rows = {5, -1, 0};
  auto values = [](int64_t count, float base) {
    std::vector<float> v(static_cast<size_t>(count));
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.37f * static_cast<float>(i % 23) - 0.011f * static_cast<float>(i);
    return v;
  };
  OwnedTensor q = f32_tensor({n, heads, head_dim}, values(n * heads * head_dim, 0.5f));
  OwnedTensor k = f32_tensor({n, kv_heads, head_dim}, values(n * kv_heads * head_dim, -1.0f));
  OwnedTensor v = f32_tensor({n, kv_heads, head_dim}, values(n * kv_heads * head_dim, 2.0f));
  OwnedTensor q_ref = f32_tensor({n, heads, head_dim}, values(n * heads * head_dim, 0.5f));
  OwnedTensor k_ref = f32_tensor({n, kv_heads, head_dim}, values(n * kv_heads * head_dim, -1.0f));
  rope(q_ref.tensor, positions, p);
  rope(k_ref.tensor, positions, p);
  const std::vector<float> untouched(static_cast<size_t>(cache_rows * kv_heads * head_dim), -7.0f);
  OwnedTensor kc = f32_tensor({cache_rows, kv_heads, head_dim}, untouched);
  OwnedTensor vc = f32_tensor({cache_rows, kv_heads, head_dim}, untouched);
  rope_store_kv(q.tensor, k.tensor, v.tensor, positions, p, rows, kc.tensor, vc.tensor);
  const int64_t row = kv_heads * head_dim;
  for (int64_t i = 0; i < n * heads * head_dim; ++i) ASSERT_EQ(q.ptr<float>()[i], q_ref.ptr<float>()[i]) << i;
  for (int64_t i = 0; i < n * row; ++i) ASSERT_EQ(k.ptr<float>()[i], k_ref.ptr<float>()[i]) << i;
  for (int64_t r = 0; r < cache_rows; ++r) {
    const int64_t t = r == 5 ? 0 : r == 0 ? 2 : -1;  // token stored in cache row r
    for (int64_t e = 0; e < row; ++e) {
      const float kw = t < 0 ? -7.0f : k_ref.ptr<float>()[t * row + e];
      const float vw = t < 0 ? -7.0f : v.ptr<float>()[t * row + e];
      ASSERT_EQ(kc.ptr<float>()[r * row + e], kw) << "row " << r << " element " << e;
      ASSERT_EQ(vc.ptr<float>()[r * row + e], vw) << "row " << r << " element " << e;
    }
  }
  // A row past the cache, a v shaped unlike k, and a row per position are refused.
  const std::vector<int32_t> past = {5, 6, 0}, short_rows = {5, 0};
  EXPECT_THROW(rope_store_kv(q.tensor, k.tensor, v.tensor, positions, p, past, kc.tensor, vc.tensor), Error);
  EXPECT_THROW(rope_store_kv(q.tensor, k.tensor, v.tensor, positions, p, short_rows, kc.tensor, vc.tensor), Error);
  EXPECT_THROW(rope_store_kv(q.tensor, k.tensor, q.tensor, positions, p, rows, kc.tensor, vc.tensor), Error);
}

TEST(Rope, RejectsBadParams) {
  OwnedTensor x(DType::F32, {1, 2, 16});
  RopeParams p;
  p.rotary_dim = 18;
  p.inv_freq.assign(9, 1.0f);
  std::vector<int32_t> pos = {0};
  EXPECT_THROW(rope(x.tensor, pos, p), Error);
  p.rotary_dim = 16;
  EXPECT_THROW(rope(x.tensor, pos, p), Error);  // 9 frequencies for rotary_dim 16
}

TEST(SiluMul, MatchesReference) {
  const int64_t n = 3, d = 1539;  // not a multiple of the SIMD width: the scalar tail runs too
  auto g = random_floats(n * d, 5, 3.0f);
  const auto u = random_floats(n * d, 6);
  g[0] = -200.0f;  // exp overflow side: silu -> -0
  g[1] = 200.0f;   // silu -> x
  g[2] = -90.0f;
  OwnedTensor gt = f32_tensor({n, d}, g), ut = f32_tensor({n, d}, u);
  silu_mul(gt.tensor, ut.tensor, gt.tensor);  // out aliases gate
  for (int64_t i = 0; i < n * d; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    ASSERT_NEAR(gt.ptr<float>()[i], ref, 1e-6 * (1 + std::fabs(ref))) << "i=" << i << " g=" << g[i];
  }
  // Batch invariance: one row alone gives the same bits.
  OwnedTensor g1 = f32_tensor({1, d}, std::vector<float>(g.begin() + d, g.begin() + 2 * d));
  OwnedTensor u1 = f32_tensor({1, d}, std::vector<float>(u.begin() + d, u.begin() + 2 * d));
  silu_mul(g1.tensor, u1.tensor, g1.tensor);
  EXPECT_TRUE(bitwise_equal(g1.ptr<float>(), gt.ptr<float>() + d, d));
}

// matmul_glu on the CPU is matmul into gate_up, then silu_mul / gelu_tanh_mul of its two
// halves: the same bits as running the two ops, gate_up left holding the products; bad
// shapes are refused with a clear error.
TEST(MatmulGlu, EqualsMatmulThenTheActivation) {
  const int64_t half = 37, k = 64;
  OwnedTensor w = make_weight(DType::Q8_0, 2 * half, k, random_floats(2 * half * k, 41));
  OwnedTensor x = f32_tensor({1, k}, random_floats(k, 42));
  for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
    OwnedTensor gate_up(DType::F32, {1, 2 * half}), out(DType::F32, {1, half});
    matmul_glu(x.tensor, w.tensor, gate_up.tensor, out.tensor, act);
    OwnedTensor products(DType::F32, {1, 2 * half}), ref(DType::F32, {1, half});
    matmul(x.tensor, w.tensor, products.tensor);
    EXPECT_TRUE(bitwise_equal(gate_up.ptr<float>(), products.ptr<float>(), 2 * half));
    const Tensor gate(DType::F32, {1, half}, products.ptr<float>());
    const Tensor up(DType::F32, {1, half}, products.ptr<float>() + half);
    if (act == GatedActivation::Silu) {
      silu_mul(gate, up, ref.tensor);
    } else {
      gelu_tanh_mul(gate, up, ref.tensor);
    }
    EXPECT_TRUE(bitwise_equal(out.ptr<float>(), ref.ptr<float>(), half));
  }

  OwnedTensor gate_up(DType::F32, {1, 2 * half}), out(DType::F32, {1, half});
  OwnedTensor odd = make_weight(DType::Q8_0, 2 * half + 1, k, random_floats((2 * half + 1) * k, 43));
  OwnedTensor odd_gate_up(DType::F32, {1, 2 * half + 1});
  const GatedActivation silu = GatedActivation::Silu;
  EXPECT_THROW(matmul_glu(x.tensor, odd.tensor, odd_gate_up.tensor, out.tensor, silu), Error);
  OwnedTensor two_rows = f32_tensor({2, k}, random_floats(2 * k, 44));
  EXPECT_THROW(matmul_glu(two_rows.tensor, w.tensor, gate_up.tensor, out.tensor, silu), Error);
  EXPECT_THROW(matmul_glu(x.tensor, w.tensor, gate_up.tensor, gate_up.tensor, silu), Error);  // out aliases gate_up
}

TEST(Add, AddsInPlace) {
  const auto a = random_floats(100, 7), b = random_floats(100, 8);
  OwnedTensor at = f32_tensor({4, 25}, a), bt = f32_tensor({4, 25}, b);
  add(at.tensor, bt.tensor);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(at.ptr<float>()[i], a[i] + b[i]);
  OwnedTensor c(DType::F32, {4, 24});
  EXPECT_THROW(add(at.tensor, c.tensor), Error);
}

TEST(Add, AddRmsNormEqualsAddThenRmsNormAndMayWriteIntoY) {
  const auto a = random_floats(2 * 64, 17), b = random_floats(2 * 64, 18), w = random_floats(64, 19);
  OwnedTensor x1 = f32_tensor({2, 64}, a), y1 = f32_tensor({2, 64}, b), x2 = f32_tensor({2, 64}, a), y2 = f32_tensor({2, 64}, b);
  OwnedTensor wt = f32_tensor({64}, w), out1(DType::F32, {2, 64});
  add(x1.tensor, y1.tensor);
  rms_norm(x1.tensor, wt.tensor, 1e-6f, out1.tensor);
  add_rms_norm(x2.tensor, y2.tensor, wt.tensor, 1e-6f, y2.tensor);  // out aliases y, as the model uses it
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(x1.ptr<float>()[i], x2.ptr<float>()[i]);
    EXPECT_EQ(out1.ptr<float>()[i], y2.ptr<float>()[i]);
  }
  OwnedTensor bad(DType::F32, {32});
  EXPECT_THROW(add_rms_norm(x2.tensor, y2.tensor, bad.tensor, 1e-6f, y2.tensor), Error);
}

TEST(Softmax, MatchesReferenceAndHandlesLargeValues) {
  const int64_t rows = 3, cols = 1000;
  auto x = random_floats(rows * cols, 9, 10.0f);
  x[5] = 1e30f;  // huge logit: the max subtraction keeps it finite
  OwnedTensor xt = f32_tensor({rows, cols}, x);
  softmax(xt.tensor);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < cols; ++i) mx = std::max(mx, static_cast<double>(x[r * cols + i]));
    for (int64_t i = 0; i < cols; ++i) sum += std::exp(x[r * cols + i] - mx);
    for (int64_t i = 0; i < cols; ++i) {
      const double ref = std::exp(x[r * cols + i] - mx) / sum;
      ASSERT_NEAR(xt.ptr<float>()[r * cols + i], ref, 1e-6 + 1e-5 * ref);
    }
  }
}

TEST(Im2col1d, GathersPaddedStridedWindowsChannelMajor) {
  // x [t_in, channels]; out row t holds x[t*stride + j - pad, c] at column c*kernel + j.
  for (int64_t stride : {1, 2}) {
    const int64_t t_in = 11, channels = 5, kernel = 3, pad = 1;
    const int64_t t_out = (t_in + 2 * pad - kernel) / stride + 1;
    const auto x = random_floats(static_cast<size_t>(t_in * channels), 21);
    OwnedTensor xt = f32_tensor({t_in, channels}, x);
    OwnedTensor out(DType::F32, {t_out, channels * kernel});
    ops::im2col_1d(xt.tensor, kernel, stride, pad, out.tensor);
    for (int64_t t = 0; t < t_out; ++t)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t j = 0; j < kernel; ++j) {
          const int64_t src = t * stride + j - pad;
          const float want = src >= 0 && src < t_in ? x[static_cast<size_t>(src * channels + c)] : 0.0f;
          ASSERT_EQ(out.ptr<float>()[t * channels * kernel + c * kernel + j], want) << stride << " " << t;
        }
    OwnedTensor wrong(DType::F32, {t_out + 1, channels * kernel});
    EXPECT_THROW(ops::im2col_1d(xt.tensor, kernel, stride, pad, wrong.tensor), Error);
  }
}

}  // namespace
}  // namespace corvid::ops
