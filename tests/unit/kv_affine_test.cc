// The affine KV formats (ops/kv_affine.h) against mlx: the same codes, scales and biases
// bit for bit as mx.quantize makes from the same values in f16 (tests/data/kv_affine),
// dequantized values within f16 roundings of mx.dequantize's (which computes s * q + b in
// f16), and every value within the format's analytic bound of the input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "binary_file_util.h"
#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/ops/kv_affine.h"
#include "fixture_util.h"

namespace corvid::ops {
namespace {

std::filesystem::path data_dir() { return fixtures::source_dir() / "tests" / "data" / "kv_affine"; }

struct Case {
  DType dtype;
  const char* file;
};

class KvAffine : public ::testing::TestWithParam<Case> {};

TEST_P(KvAffine, CodesScalesAndBiasesAreMlxs) {
  const DType t = GetParam().dtype;
  const std::vector<float> x = fixtures::array_of<float>(data_dir() / "input.f32");
  const std::vector<uint8_t> want = fixtures::array_of<uint8_t>(data_dir() / (std::string(GetParam().file) + ".bin"));
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_EQ(want.size(), bytes_for(t, n));
  std::vector<uint8_t> got(bytes_for(t, n));
  kv_affine::quantize(t, x.data(), n, got.data());
  const int block = dtype_info(t).block_bytes;
  int64_t differing = 0;
  for (size_t g = 0; g < got.size() / static_cast<size_t>(block); ++g)
    if (std::memcmp(got.data() + g * static_cast<size_t>(block), want.data() + g * static_cast<size_t>(block),
                    static_cast<size_t>(block)) != 0) {
      if (differing++ < 3) ADD_FAILURE() << "group " << g << " differs from mlx's";
    }
  EXPECT_EQ(differing, 0);
}

TEST_P(KvAffine, DequantizesWithinTheBound) {
  const DType t = GetParam().dtype;
  const kv_affine::Format f = *kv_affine::format_of(t);
  const std::vector<float> x = fixtures::array_of<float>(data_dir() / "input.f32");
  const std::vector<float> mlx = fixtures::array_of<float>(data_dir() / (std::string(GetParam().file) + ".deq.f32"));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(bytes_for(t, n));
  kv_affine::quantize(t, x.data(), n, q.data());
  std::vector<float> y(x.size());
  kv_affine::dequantize(t, q.data(), n, y.data());
  const int block = dtype_info(t).block_bytes;
  double worst_ratio = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* b = q.data() + (i / f.group) * block;
    uint16_t s16, b16;
    std::memcpy(&s16, b + f.code_bytes(), 2);
    std::memcpy(&b16, b + f.code_bytes() + 2, 2);
    const double s = std::abs(f16_to_f32(s16)), bias = std::abs(f16_to_f32(b16)), levels = (1 << f.bits) - 1;
    // One step: half of one from rounding to a code, except at the far end of a group,
    // since mlx moves the scale to make the larger-magnitude extreme exact (scale =
    // edge / q0), which shrinks it by up to a factor (2^bits - 1) / 2^bits and can put the
    // other extreme up to one step past the last code, where it is clamped. Plus the f16
    // roundings (half an ulp: 2^-11 relative, or 2^-25 below f16's normal range) of the
    // value itself, of the bias, and of the scale, which the codes were made with
    // unrounded (so up to 2^bits - 1 steps of its rounding, and one more).
    const double eps16 = std::ldexp(1.0, -11), tiny = std::ldexp(1.0, -24);
    auto rounding = [&](double v) { return eps16 * v + tiny / 2; };
    const double bound =
        s + (levels + 1) * rounding(s) + rounding(bias) + rounding(std::abs(x[static_cast<size_t>(i)]));
    const double err = std::abs(static_cast<double>(y[static_cast<size_t>(i)]) - x[static_cast<size_t>(i)]);
    EXPECT_LE(err, bound) << "value " << i;
    worst_ratio = std::max(worst_ratio, err / bound);
    // mlx computes s * q + b in f16 (each operation rounded): ours (in float) is within
    // those roundings of it.
    const double m = mlx[static_cast<size_t>(i)];
    EXPECT_LE(std::abs(y[static_cast<size_t>(i)] - m), eps16 * (levels * s + bias + std::abs(m)) + tiny)
        << "value " << i;
  }
  std::printf("%s: worst error %.2f of the bound\n", GetParam().file, worst_ratio);
}

TEST(KvAffineFormats, AreWhatTheDtypesSay) {
  EXPECT_EQ(bytes_for(DType::A8G64, 128), 2u * 68);
  EXPECT_EQ(bytes_for(DType::A4G64, 128), 2u * 36);
  EXPECT_EQ(bytes_for(DType::A8G32, 64), 2u * 36);
  EXPECT_EQ(bytes_for(DType::A4G32, 64), 2u * 20);
  EXPECT_FALSE(kv_affine::is_affine(DType::Q8_0));
  std::vector<uint8_t> out(64);
  const std::vector<float> x(48, 1.0f);
  EXPECT_THROW(kv_affine::quantize(DType::A8G32, x.data(), 48, out.data()), Error);  // not whole groups
  EXPECT_THROW(kv_affine::quantize(DType::F16, x.data(), 32, out.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(Formats, KvAffine,
                         ::testing::Values(Case{DType::A8G64, "q8_g64"}, Case{DType::A4G64, "q4_g64"},
                                           Case{DType::A8G32, "q8_g32"}, Case{DType::A4G32, "q4_g32"}),
                         [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.file); });

}  // namespace
}  // namespace corvid::ops
