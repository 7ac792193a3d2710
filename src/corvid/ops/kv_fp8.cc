#include "corvid/ops/kv_fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "corvid/core/error.h"

namespace corvid::ops::kv_fp8 {

uint8_t encode(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::abs(x);
  if (a >= kMax) return sign | 0x7E;
  // Below 2^-6 the codes are subnormal, steps of 2^-9; code 8 is 2^-6, the first normal.
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a's exponent is e - 1
  // Three mantissa bits: steps of 2^(e - 4); q in [8, 16], 16 carrying into the exponent.
  auto q = static_cast<int>(std::nearbyint(std::ldexp(a, 4 - e)));
  if (q == 16) {
    q = 8;
    ++e;
  }
  const int biased = e - 1 + 7;
  return sign | static_cast<uint8_t>((biased << 3) | (q - 8));  // a < 448 keeps it finite
}

float decode(uint8_t code) {
  const int e = (code >> 3) & 0xF, m = code & 7;
  if (e == 0xF && m == 7) return NAN;
  const float a = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (code & 0x80) ? -a : a;
}

namespace {

constexpr size_t kGroupBytes = kGroup + sizeof(float);

void check_groups(int64_t n) {
  CORVID_CHECK(n >= 0 && n % kGroup == 0, "kv_fp8: ", n, " values are not whole groups of ", kGroup);
}

// decode() without branches or lookups, so a row's loop vectorizes: a normal code's
// exponent and mantissa bits are a float's, rebiased (7 -> 127: add 120 to the
// exponent); the subnormal codes (exponent 0) are m * 2^-9, NaN codes stay NaN.
inline float decode_fast(uint8_t code) {
  const uint32_t mag = code & 0x7Fu, sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t normal = (mag << 20) + (120u << 23);
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(mag) * 0x1p-9f);
  // Masks, not conditionals: GCC keeps a conditional as control flow and the loop scalar.
  const uint32_t is_sub = 0u - static_cast<uint32_t>(mag < 8), is_nan = 0u - static_cast<uint32_t>(mag == 0x7Fu);
  const uint32_t finite = (subnormal & is_sub) | (normal & ~is_sub);
  return std::bit_cast<float>(((finite & ~is_nan) | (0x7FC00000u & is_nan)) | sign);
}

}  // namespace

void quantize(const float* x, int64_t n, uint8_t* dst) {
  check_groups(n);
  for (int64_t g = 0; g < n / kGroup; ++g, x += kGroup, dst += kGroupBytes) {
    float amax = 0;
    for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::abs(x[j]));
    const float scale = amax / kMax;
    for (int j = 0; j < kGroup; ++j) dst[j] = scale > 0 ? encode(x[j] / scale) : 0;
    std::memcpy(dst + kGroup, &scale, sizeof scale);
  }
}

void dequantize(const uint8_t* src, int64_t n, float* out) {
  check_groups(n);
  for (int64_t g = 0; g < n / kGroup; ++g, src += kGroupBytes, out += kGroup) {
    float scale;
    std::memcpy(&scale, src + kGroup, sizeof scale);
    // The codes copied out first: out's stores could otherwise alias them (bytes alias
    // anything), which keeps the loop scalar.
    uint8_t codes[kGroup];
    std::memcpy(codes, src, kGroup);
    for (int j = 0; j < kGroup; ++j) out[j] = scale * decode_fast(codes[j]);
  }
}

}  // namespace corvid::ops::kv_fp8
