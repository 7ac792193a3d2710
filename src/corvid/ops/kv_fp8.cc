#include "corvid/ops/kv_fp8.h"

#include <algorithm>
#include <array>
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

// Every code's value, so a row decodes with one lookup per value.
const std::array<float, 256>& code_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = decode(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
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
  const std::array<float, 256>& value = code_values();
  for (int64_t g = 0; g < n / kGroup; ++g, src += kGroupBytes, out += kGroup) {
    float scale;
    std::memcpy(&scale, src + kGroup, sizeof scale);
    for (int j = 0; j < kGroup; ++j) out[j] = scale * value[src[j]];
  }
}

}  // namespace corvid::ops::kv_fp8
