#include "corvid/ops/kv_affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "corvid/core/error.h"
#include "corvid/core/half.h"

namespace corvid::ops::kv_affine {

std::optional<Format> format_of(DType t) {
  switch (t) {
    case DType::A8G64: return Format{8, 64};
    case DType::A4G64: return Format{4, 64};
    case DType::A8G32: return Format{8, 32};
    case DType::A4G32: return Format{4, 32};
    default: return std::nullopt;
  }
}

namespace {

Format checked_format(DType t, int64_t n) {
  const std::optional<Format> f = format_of(t);
  CORVID_CHECK(f.has_value(), "kv_affine: ", dtype_name(t), " is not an affine KV format");
  CORVID_CHECK(n >= 0 && n % f->group == 0, "kv_affine: ", n, " values are not whole groups of ", f->group);
  return *f;
}

// One group, as mlx's CPU quantize does it in float: the scale spans [min, max] over
// 2^bits - 1 steps, signed so that the extreme of larger magnitude ("edge") is code 0,
// then adjusted so that the edge is exact (scale = edge / q0, bias = edge) unless it
// rounds to code 0.
void quantize_group(const Format& f, const float* x, uint8_t* dst) {
  const float n_bins = static_cast<float>((1 << f.bits) - 1);
  const float eps = 1e-7f;
  float w[64];
  float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
  for (int j = 0; j < f.group; ++j) {
    w[j] = f16_to_f32(f32_to_f16(x[j]));
    w_max = std::max(w_max, w[j]);
    w_min = std::min(w_min, w[j]);
  }
  const bool mask = std::abs(w_min) > std::abs(w_max);
  float scale = std::max((w_max - w_min) / n_bins, eps);
  scale = mask ? scale : -scale;
  const float edge = mask ? w_min : w_max;
  const float q0 = std::rint(edge / scale);
  float bias = 0;
  if (q0 != 0) {
    scale = edge / q0;
    bias = edge;
  }
  std::memset(dst, 0, static_cast<size_t>(f.code_bytes()));
  for (int j = 0; j < f.group; ++j) {
    const float q = std::min(std::max(std::rint((w[j] - bias) / scale), 0.0f), n_bins);
    const auto code = static_cast<uint32_t>(q);
    if (f.bits == 8) {
      dst[j] = static_cast<uint8_t>(code);
    } else {
      dst[j / 2] = static_cast<uint8_t>(dst[j / 2] | (code << (4 * (j % 2))));
    }
  }
  const uint16_t s16 = f32_to_f16(scale), b16 = f32_to_f16(bias);
  std::memcpy(dst + f.code_bytes(), &s16, 2);
  std::memcpy(dst + f.code_bytes() + 2, &b16, 2);
}

}  // namespace

void quantize(DType t, const float* x, int64_t n, uint8_t* dst) {
  const Format f = checked_format(t, n);
  const size_t block = static_cast<size_t>(dtype_info(t).block_bytes);
  for (int64_t g = 0; g < n / f.group; ++g) quantize_group(f, x + g * f.group, dst + static_cast<size_t>(g) * block);
}

void dequantize(DType t, const uint8_t* src, int64_t n, float* out) {
  const Format f = checked_format(t, n);
  const size_t block = static_cast<size_t>(dtype_info(t).block_bytes);
  for (int64_t g = 0; g < n / f.group; ++g) {
    const uint8_t* b = src + static_cast<size_t>(g) * block;
    uint16_t s16, b16;
    std::memcpy(&s16, b + f.code_bytes(), 2);
    std::memcpy(&b16, b + f.code_bytes() + 2, 2);
    const float scale = f16_to_f32(s16), bias = f16_to_f32(b16);
    float* o = out + g * f.group;
    if (f.bits == 8) {
      for (int j = 0; j < f.group; ++j) o[j] = scale * static_cast<float>(b[j]) + bias;
    } else {
      // A byte holds two values, the first in its low nibble (the same arithmetic per
      // value; pairs let the compiler vectorize the unpacking).
      for (int j = 0; j < f.group / 2; ++j) {
        o[2 * j] = scale * static_cast<float>(b[j] & 0xf) + bias;
        o[2 * j + 1] = scale * static_cast<float>(b[j] >> 4) + bias;
      }
    }
  }
}

}  // namespace corvid::ops::kv_affine
