// Block quant formats: layouts against hand-built blocks, quantize -> dequantize
// error bounds, vec_dot against dequantized references, SIMD against scalar.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/ops/cpu/quants.h"
#include "ops_test_util.h"

namespace corvid::ops::cpu {
namespace {

using corvid::testing::random_floats;

const DType kWeightTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(bytes_for(t, static_cast<int64_t>(x.size())));
  quant_kernels(t).quantize(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, size_t k) {
  std::vector<float> y(k);
  quant_kernels(t).dequantize(q.data(), y.data(), static_cast<int64_t>(k));
  return y;
}

// ---- layouts: hand-built blocks decode to the values ggml defines ----

TEST(QuantLayout, Q4_0NibbleOrder) {
  BlockQ4_0 b{};
  b.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j));
  }
}

TEST(QuantLayout, Q5_1HighBits) {
  BlockQ5_1 b{};
  b.d = f32_to_f16(1.0f);
  b.m = f32_to_f16(-3.0f);
  const uint32_t qh = 0x80000001u;  // element 0 and element 31 get the fifth bit
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x21;  // low nibble 1, high nibble 2
  float y[32];
  dequantize_row_q5_1(&b, y, 32);
  EXPECT_EQ(y[0], 17.0f - 3.0f);
  EXPECT_EQ(y[1], 1.0f - 3.0f);
  EXPECT_EQ(y[16], 2.0f - 3.0f);
  EXPECT_EQ(y[31], 18.0f - 3.0f);
}

TEST(QuantLayout, Q4_KScalePacking) {
  // Scales j<4 live in the low 6 bits of bytes 0-3 (mins 4-7); j>=4 split across byte j+4 and the top bits.
  uint8_t s[12] = {};
  s[0] = 5 | (2 << 6);  // sc0 = 5, top bits of sc4 = 2
  s[4] = 7 | (1 << 6);  // m0 = 7, top bits of m4 = 1
  s[8] = 3 | (9 << 4);  // sc4 low = 3, m4 low = 9
  uint8_t sc, m;
  unpack_scale_min_k4(s, 0, &sc, &m);
  EXPECT_EQ(sc, 5);
  EXPECT_EQ(m, 7);
  unpack_scale_min_k4(s, 4, &sc, &m);
  EXPECT_EQ(sc, 3 + (2 << 4));
  EXPECT_EQ(m, 9 + (1 << 4));
}

TEST(QuantLayout, Q6_KElementOrder) {
  BlockQ6_K b{};
  b.d = f32_to_f16(1.0f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g + 1);
  // Element 64 of the first half: high nibble of ql[0], qh[0] bits 4-5.
  b.ql[0] = 0x50;      // element 0 low nibble 0, element 64 low nibble 5
  b.qh[0] = 0x2 << 4;  // element 64 high bits = 2 -> q = 5 + 32 = 37 -> 37 - 32 = 5
  std::vector<float> y(256);
  dequantize_row_q6_k(&b, y.data(), 256);
  EXPECT_EQ(y[0], -32.0f * 1);     // q = 0 -> -32, scale group 0
  EXPECT_EQ(y[64], 5.0f * 5);      // group 64/16 = 4 -> scale 5
  EXPECT_EQ(y[200], -32.0f * 13);  // untouched element of group 12
}

// Random blocks dequantized by gguf-py (llama.cpp's Python package), an independent
// oracle for every layout: scripts/make_quant_fixture.py wrote tests/data/quant_blocks.bin.
TEST(QuantLayout, MatchesGgufPyOnRandomBlocks) {
  std::ifstream in(std::string(CORVID_SOURCE_DIR) + "/tests/data/quant_blocks.bin", std::ios::binary);
  ASSERT_TRUE(in) << "missing tests/data/quant_blocks.bin";
  auto read_u32 = [&] {
    uint32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  int types_seen = 0;
  while (in.peek() != EOF) {
    std::string name(read_u32(), '\0');
    in.read(name.data(), static_cast<std::streamsize>(name.size()));
    const uint32_t nblocks = read_u32(), nbytes = read_u32();
    DType t = DType::F32;
    for (DType c : kWeightTypes)
      if (dtype_name(c) == name) t = c;
    ASSERT_NE(t, DType::F32) << name;
    ASSERT_EQ(static_cast<int>(nbytes), dtype_info(t).block_bytes) << name;
    const size_t k = static_cast<size_t>(nblocks) * static_cast<size_t>(dtype_info(t).block_elems);
    std::vector<uint8_t> raw(static_cast<size_t>(nblocks) * nbytes);
    std::vector<float> want(k), got(k);
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(k * 4));
    ASSERT_TRUE(in) << name << ": truncated fixture";
    quant_kernels(t).dequantize(raw.data(), got.data(), static_cast<int64_t>(k));
    for (size_t i = 0; i < k; ++i) {
      // Same formula, possibly another multiplication order: a couple of float ulps.
      ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << name << " element " << i;
    }
    ++types_seen;
  }
  EXPECT_EQ(types_seen, 8);
}

// ---- round trips ----

struct RoundTripBound {
  DType t;
  double max_rel_rms;  // rms(error) / rms(x) for N(0, 1) data
};

TEST(Quant, RoundTripErrorBounds) {
  // Bounds: ~ step / sqrt(12) relative to the block range, with margin. Measured values are
  // around 60-70% of these.
  const RoundTripBound bounds[] = {
      {DType::Q4_0, 0.12},  {DType::Q4_1, 0.10}, {DType::Q5_0, 0.06}, {DType::Q5_1, 0.05},  {DType::Q8_0, 0.008},
      {DType::Q8_1, 0.008}, {DType::Q4_K, 0.12}, {DType::Q5_K, 0.06}, {DType::Q6_K, 0.035}, {DType::Q8_K, 0.01},
  };
  const size_t k = 1024;
  const std::vector<float> x = random_floats(k, 7);
  for (const auto& b : bounds) {
    const std::vector<float> y = dequantize(b.t, quantize(b.t, x), k);
    double err = 0, ref = 0;
    for (size_t i = 0; i < k; ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]);
      ref += x[i] * x[i];
    }
    EXPECT_LT(std::sqrt(err / ref), b.max_rel_rms) << dtype_name(b.t);
  }
}

TEST(Quant, SimdActivationQuantizersAreBitExact) {
  const size_t k = 32 * 40;
  std::vector<float> x = random_floats(k, 77, 5.0f);
  for (size_t i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block
  x[200] = 0.5f * 127.0f / 127.0f;               // values near rounding ties
  for (DType t : {DType::Q8_0, DType::Q8_1}) {
    std::vector<uint8_t> a(bytes_for(t, k)), b(bytes_for(t, k));
    quant_kernels(t).quantize(x.data(), a.data(), static_cast<int64_t>(k));
    (t == DType::Q8_0 ? quantize_row_q8_0 : quantize_row_q8_1)(x.data(), b.data(), static_cast<int64_t>(k));
    EXPECT_EQ(a, b) << dtype_name(t);
  }
}

TEST(Quant, ZeroBlocksStayZero) {
  const std::vector<float> x(512, 0.0f);
  for (DType t : kWeightTypes) {
    const std::vector<float> y = dequantize(t, quantize(t, x), x.size());
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

// ---- dot products ----

struct DotCase {
  std::vector<float> w, x;      // float sources
  std::vector<uint8_t> wq, xq;  // quantized
  std::vector<float> wd, xd;    // dequantized
};

DotCase make_case(DType t, size_t k, uint32_t seed) {
  DotCase c;
  c.w = random_floats(k, seed);
  c.x = random_floats(k, seed + 1000, 3.0f);
  const DType act = quant_kernels(t).act;
  c.wq = quantize(t, c.w);
  c.xq = quantize(act, c.x);
  c.wd = dequantize(t, c.wq, k);
  c.xd = dequantize(act, c.xq, k);
  return c;
}

TEST(Quant, VecDotMatchesDequantizedReference) {
  const size_t k = 768;
  for (DType t : kWeightTypes) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      const DotCase c = make_case(t, k, seed);
      double exact = 0, mag = 0, x_err = 0, dequant_float_dot = 0;
      for (size_t i = 0; i < k; ++i) {
        exact += static_cast<double>(c.wd[i]) * c.xd[i];
        mag += std::fabs(static_cast<double>(c.wd[i]) * c.xd[i]);
        x_err += std::fabs(static_cast<double>(c.wd[i])) * std::fabs(c.xd[i] - c.x[i]);
        dequant_float_dot += static_cast<double>(c.wd[i]) * c.x[i];
      }
      const QuantKernels& qk = quant_kernels(t);
      for (VecDotFn fn : {qk.vec_dot_scalar, qk.vec_dot_avx2, qk.vec_dot_avx512}) {
        if (!fn) continue;
        const double got = fn(c.wq.data(), c.xq.data(), static_cast<int64_t>(k));
        // Against the same quantized values: float rounding only, plus Q8_1's f16 block sum
        // s = d*sum(q) (relative 2^-11 of |m*s|), covered by 1e-3 of the magnitude.
        EXPECT_NEAR(got, exact, 1e-3 * mag + 1e-5) << dtype_name(t) << " seed " << seed;
        // Against float activations: bounded by the activation quantization error.
        EXPECT_NEAR(got, dequant_float_dot, 1.5 * x_err + 1e-3 * mag + 1e-5) << dtype_name(t) << " seed " << seed;
      }
    }
  }
}

TEST(Quant, SimdMatchesScalar) {
  // Block counts that exercise every tail of the 8-block scale groups and 2-block pairs.
  for (DType t : kWeightTypes) {
    const size_t block = static_cast<size_t>(dtype_info(t).block_elems);
    for (size_t nb : {1u, 2u, 3u, 7u, 8u, 9u, 18u, 48u}) {
      const size_t k = nb * block;
      const DotCase c = make_case(t, k, static_cast<uint32_t>(k));
      double mag = 0;
      for (size_t i = 0; i < k; ++i) mag += std::fabs(static_cast<double>(c.wd[i]) * c.xd[i]);
      const QuantKernels& qk = quant_kernels(t);
      const float scalar = qk.vec_dot_scalar(c.wq.data(), c.xq.data(), static_cast<int64_t>(k));
      for (VecDotFn fn : {qk.vec_dot_avx2, qk.vec_dot_avx512}) {
        if (!fn) continue;
        // Same integer block sums; only the float accumulation order differs.
        EXPECT_NEAR(fn(c.wq.data(), c.xq.data(), static_cast<int64_t>(k)), scalar, 1e-5 * mag + 1e-6)
            << dtype_name(t) << " blocks " << nb << (fn == qk.vec_dot_avx512 ? " avx512" : " avx2");
      }
    }
  }
}

TEST(Quant, SimdIsCompiledIn) {
#if defined(__AVX2__)
  for (DType t : kWeightTypes) EXPECT_NE(quant_kernels(t).vec_dot, quant_kernels(t).vec_dot_scalar) << dtype_name(t);
#else
  GTEST_SKIP() << "no AVX2 in this build";
#endif
}

TEST(Quant, ExtremeWeightQuantsDoNotSaturate) {
  // Q8_0 weights of -128/127 against activations of -127/127: the AVX2 fallback's 16-bit
  // pair sums are the risky case; results must equal the scalar kernel exactly (one block).
  BlockQ8_0 w{}, x{};
  w.d = x.d = f32_to_f16(1.0f);
  for (int j = 0; j < 32; ++j) {
    w.qs[j] = static_cast<int8_t>(j % 2 ? 127 : -127);
    x.qs[j] = static_cast<int8_t>(j % 3 ? 127 : -127);
  }
  EXPECT_EQ(quant_kernels(DType::Q8_0).vec_dot(&w, &x, 32), vec_dot_q8_0_q8_0_scalar(&w, &x, 32));
}

TEST(Quant, NotAWeightDtypeThrows) {
  EXPECT_THROW(quant_kernels(DType::F32), Error);
  EXPECT_EQ(quant_kernels(DType::Q8_K).vec_dot, nullptr);
}

TEST(Quant, GemmKernelsAreBitIdenticalToSingleRow) {
  // Row counts around the 16-row panel and token counts around the 8-token group.
  for (DType t : kWeightTypes) {
    const QuantKernels& qk = quant_kernels(t);
    if (!qk.gemm) continue;
    for (size_t nsb : {1u, 3u}) {
      const size_t k = nsb * kQKK;
      for (int64_t rows : {int64_t{1}, int64_t{16}, int64_t{21}}) {
        std::vector<uint8_t> w;
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<uint8_t> row = quantize(t, random_floats(k, 7 + static_cast<uint32_t>(r)));
          w.insert(w.end(), row.begin(), row.end());
        }
        const size_t w_stride = bytes_for(t, static_cast<int64_t>(k));
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{19}}) {
          std::vector<uint8_t> x;
          for (int64_t i = 0; i < n; ++i) {
            const std::vector<uint8_t> row = quantize(qk.act, random_floats(k, 500 + static_cast<uint32_t>(i), 3.0f));
            x.insert(x.end(), row.begin(), row.end());
          }
          const size_t x_stride = bytes_for(qk.act, static_cast<int64_t>(k));
          const int64_t ldo = rows + 3;  // output rows wider than the weight range
          std::vector<float> out(static_cast<size_t>(n * ldo), -1.0f);
          qk.gemm(w.data(), w_stride, rows, x.data(), x_stride, n, out.data(), ldo, static_cast<int64_t>(k));
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t r = 0; r < rows; ++r) {
              const float single = qk.vec_dot(w.data() + static_cast<size_t>(r) * w_stride,
                                              x.data() + static_cast<size_t>(i) * x_stride, static_cast<int64_t>(k));
              const float got = out[static_cast<size_t>(i * ldo + r)];
              ASSERT_EQ(std::memcmp(&got, &single, 4), 0)
                  << dtype_name(t) << " rows " << rows << " n " << n << " (" << i << ", " << r << ") " << got
                  << " vs " << single;
            }
            for (int64_t r = rows; r < ldo; ++r) ASSERT_EQ(out[static_cast<size_t>(i * ldo + r)], -1.0f);  // untouched
          }
        }
      }
    }
  }
#if defined(__AVX512VNNI__) && defined(__AVX2__)
  EXPECT_NE(quant_kernels(DType::Q4_K).gemm, nullptr);
  EXPECT_NE(quant_kernels(DType::Q6_K).gemm, nullptr);
#endif
}

}  // namespace
}  // namespace corvid::ops::cpu
