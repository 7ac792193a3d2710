// The FP8 KV format (ops/kv_fp8.h) against ml_dtypes' float8_e4m3fn (tests/data/kv_fp8):
// every code's value, the ties between neighbouring codes and random values encode to
// the same codes; groups of 64 get the same codes and scales bit for bit; decoded values
// lie within half a code step (2^-4 relative, or 2^-10 of the scale below the normals).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "binary_file_util.h"
#include "corvid/core/error.h"
#include "corvid/ops/kv_codec.h"
#include "corvid/ops/kv_fp8.h"
#include "fixture_util.h"

namespace corvid::ops {
namespace {

std::filesystem::path data_dir() { return fixtures::source_dir() / "tests" / "data" / "kv_fp8"; }

TEST(KvFp8, EncodesAsMlDtypes) {
  const std::vector<float> x = fixtures::array_of<float>(data_dir() / "sweep.f32");
  const std::vector<uint8_t> want = fixtures::array_of<uint8_t>(data_dir() / "sweep.u8");
  ASSERT_EQ(x.size(), want.size());
  ASSERT_GT(x.size(), 4000u);
  int differing = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (kv_fp8::encode(x[i]) != want[i] && differing++ < 5)
      ADD_FAILURE() << x[i] << ": " << int{kv_fp8::encode(x[i])} << ", ml_dtypes " << int{want[i]};
  EXPECT_EQ(differing, 0);
}

TEST(KvFp8, DecodesEveryCodeAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float v = kv_fp8::decode(code);
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(kv_fp8::encode(v), c == 0x80 ? 0x80 : code) << c;  // a value is its own code
    }
  }
  EXPECT_EQ(kv_fp8::decode(0x7E), 448.0f);
  EXPECT_EQ(kv_fp8::decode(0x01), 0x1p-9f);
  EXPECT_EQ(kv_fp8::encode(1e6f), 0x7E);   // saturates, as Hopper's satfinite conversion
  EXPECT_EQ(kv_fp8::encode(-500.0f), 0xFE);
  EXPECT_EQ(kv_fp8::encode(NAN), 0x7F);
}

// dequantize's branch-free decoding gives decode()'s bits for every code (scale 1).
TEST(KvFp8, DequantizeDecodesEveryCodeAsDecode) {
  std::vector<uint8_t> group(4 * 68);
  const float one = 1.0f;
  for (int c = 0; c < 256; ++c) group[static_cast<size_t>(c / 64 * 68 + c % 64)] = static_cast<uint8_t>(c);
  for (int g = 0; g < 4; ++g) std::memcpy(group.data() + g * 68 + 64, &one, 4);
  std::vector<float> out(256);
  kv_fp8::dequantize(group.data(), 256, out.data());
  for (int c = 0; c < 256; ++c) {
    const float want = kv_fp8::decode(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out[static_cast<size_t>(c)])) << c;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(c)]), std::bit_cast<uint32_t>(want)) << c;
    }
  }
}

TEST(KvFp8, GroupsAreTheOraclesBitForBit) {
  const std::vector<float> x = fixtures::array_of<float>(data_dir() / "input.f32");
  const std::vector<uint8_t> want = fixtures::array_of<uint8_t>(data_dir() / "fp8.bin");
  const std::vector<float> deq = fixtures::array_of<float>(data_dir() / "fp8.deq.f32");
  const auto n = static_cast<int64_t>(x.size());
  ASSERT_EQ(want.size(), bytes_for(DType::F8G64, n));
  std::vector<uint8_t> got(want.size());
  kv_codec::encode(DType::F8G64, x.data(), n, got.data());
  for (size_t g = 0; g < got.size() / 68; ++g)
    EXPECT_EQ(std::memcmp(got.data() + g * 68, want.data() + g * 68, 68), 0) << "group " << g;
  std::vector<float> y(x.size());
  kv_codec::decode(DType::F8G64, got.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[static_cast<size_t>(i)], deq[static_cast<size_t>(i)]) << i;
    float scale;
    std::memcpy(&scale, got.data() + (i / 64) * 68 + 64, 4);
    const float a = std::abs(x[static_cast<size_t>(i)]);
    // Half a step of the code's binade (3 mantissa bits), or of the subnormals' 2^-9.
    const float bound = std::max(a * 0x1p-4f, scale * 0x1p-10f) * 1.0001f;
    EXPECT_LE(std::abs(y[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), bound) << i;
  }
}

TEST(KvFp8, RefusesPartialGroups) {
  std::vector<float> x(48);
  std::vector<uint8_t> out(68);
  EXPECT_THROW(kv_fp8::quantize(x.data(), 48, out.data()), Error);
  EXPECT_TRUE(kv_codec::is_coded(DType::F8G64));
  EXPECT_FALSE(kv_codec::is_coded(DType::BF16));
  EXPECT_EQ(kv_codec::group_values(DType::F8G64), 64);
}

}  // namespace
}  // namespace corvid::ops
