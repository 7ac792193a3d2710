#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/core/dtype.h"
#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/core/thread_pool.h"
#include "corvid/core/utf8.h"

namespace corvid {
namespace {

TEST(DType, BytesForBlocks) {
  EXPECT_EQ(bytes_for(DType::F32, 10), 40u);
  EXPECT_EQ(bytes_for(DType::Q4_0, 64), 36u);
  EXPECT_EQ(bytes_for(DType::Q6_K, 512), 420u);
  EXPECT_THROW(bytes_for(DType::Q8_0, 33), Error);
}

TEST(Half, RoundTripsAndRounds) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(f)), f);
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(f)), bf16_to_f32(f32_to_bf16(bf16_to_f32(f32_to_bf16(f)))));
  }
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  // 1 + 2^-11 lies halfway between two halves; ties go to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Utf8, DecodesWellFormedAndRejectsTheRest) {
  char32_t cp = 0;
  EXPECT_EQ(utf8::decode("a", 0, &cp), 1u);
  EXPECT_EQ(cp, U'a');
  EXPECT_EQ(utf8::decode("x\xc3\xa9", 1, &cp), 2u);
  EXPECT_EQ(cp, U'\u00e9');
  EXPECT_EQ(utf8::decode("\xf0\x9f\x98\x80", 0, &cp), 4u);
  EXPECT_EQ(cp, U'\U0001F600');
  // Overlong forms, surrogates, > U+10FFFF, lone continuations, cut-off sequences.
  for (const char* bad : {"\xc0\x80", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xff", "\xe4\xbd"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(utf8::decode(bad, 0, &cp), 0u);
    EXPECT_FALSE(utf8::is_valid(bad));
  }
  std::size_t len = 0;
  EXPECT_EQ(utf8::classify("\xe4\xbd", 0, &len), utf8::SeqStatus::Incomplete);
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(utf8::classify("\xe4\xbdx", 0, &len), utf8::SeqStatus::Invalid);
  EXPECT_EQ(len, 2u);  // the maximal ill-formed subpart
  std::string out;
  for (char32_t c : {U'a', U'\u00e9', U'\u4e2d', U'\U0001F600'}) utf8::append(out, c);
  EXPECT_EQ(out, "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_TRUE(utf8::is_valid(out));
}

TEST(Tensor, ShapeAndRows) {
  OwnedTensor t(DType::F32, {3, 4, 8});
  EXPECT_EQ(t.tensor.numel(), 96);
  EXPECT_EQ(t.tensor.rows(), 12);
  EXPECT_EQ(t.tensor.row_bytes(), 32u);
  EXPECT_EQ(t.tensor.row<float>(2) - t.tensor.ptr<float>(), 16);
  EXPECT_THROW(t.tensor.reshaped({5, 5}), Error);
  EXPECT_EQ(t.tensor.reshaped({12, 8}).shape_str(), "[12, 8]");
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 7, 1000, 12345}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (int rep = 0; rep < 3; ++rep)
      pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
    for (auto& h : hits) ASSERT_EQ(h.load(), 3);
  }
}

}  // namespace
// The CORVID_NO_* switches: set to anything but "" or "0" means on.
TEST(CoreEnv, FlagIsOnForAnyValueButEmptyOrZero) {
  const char* name = "CORVID_TEST_ENV_FLAG";
  unsetenv(name);
  EXPECT_FALSE(env_flag(name));
  for (const char* off : {"", "0"}) {
    setenv(name, off, 1);
    EXPECT_FALSE(env_flag(name)) << "'" << off << "'";
  }
  for (const char* on : {"1", "yes", "00"}) {
    setenv(name, on, 1);
    EXPECT_TRUE(env_flag(name)) << on;
  }
  unsetenv(name);
}

// The integer knobs: a whole decimal integer, else the fallback.
TEST(CoreEnv, IntIsTheWholeNumberOrTheFallback) {
  const char* name = "CORVID_TEST_ENV_INT";
  unsetenv(name);
  EXPECT_EQ(env_int(name, 7), 7);
  for (const char* bad : {"", "4x", "x4", "1.5", "99999999999"}) {
    setenv(name, bad, 1);
    EXPECT_EQ(env_int(name, 7), 7) << "'" << bad << "'";
  }
  setenv(name, "4", 1);
  EXPECT_EQ(env_int(name, 7), 4);
  setenv(name, "-3", 1);
  EXPECT_EQ(env_int(name, 7), -3);
  unsetenv(name);
}

}  // namespace corvid
