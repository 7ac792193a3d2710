// Reference (scalar) kernels of the 256-element K-quant formats Q4_K, Q5_K,
// Q6_K and the Q8_K activation format. The quantizers are simple (per-sub-block
// min/max, scales rounded to the 6/8-bit grid); they exist to make test data and
// need not match llama.cpp's iterative search.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "corvid/core/half.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

namespace {

inline int nearest(float v) { return static_cast<int>(std::lrintf(v)); }

// Unpacked Q4_K/Q5_K block: q[e] for element e (0..31 range) and float scale/min per 32-sub-block.
void unpack_k4_scales(const uint16_t d16, const uint16_t dmin16, const uint8_t* scales, float* dl, float* ml) {
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(scales, j, &sc, &m);
    dl[j] = d * sc;
    ml[j] = dmin * m;
  }
}

void unpack_q4k_quants(const uint8_t* qs, int* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = qs[32 * c + l] & 0x0F;
      q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
    }
  }
}

void unpack_q5k_quants(const uint8_t* qs, const uint8_t* qh, int* q) {
  unpack_q4k_quants(qs, q);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] |= ((qh[l] >> (2 * c)) & 1) << 4;
      q[64 * c + 32 + l] |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
    }
  }
}

void unpack_q6k_quants(const BlockQ6_K& b, int* q) {  // q in -32..31
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int* y = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y[l] = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      y[l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
    }
  }
}

// Affine K-quant (Q4_K: 16 levels, Q5_K: 32): per sub-block x ~ scale*q - min with min >= 0,
// then scales and mins quantized to 6 bits against the super-block d and dmin.
template <int kLevels>
void quantize_k_affine(const float* x, uint16_t* d16, uint16_t* dmin16, uint8_t* scales, int* q) {
  float scale[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float lo = 0, hi = 0;  // the range includes 0 so that min stays non-negative
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, xs[l]);
      hi = std::max(hi, xs[l]);
    }
    scale[j] = (hi - lo) / static_cast<float>(kLevels - 1);
    mins[j] = -lo;
  }
  const float max_scale = *std::max_element(scale, scale + 8);
  const float max_min = *std::max_element(mins, mins + 8);
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  *d16 = f32_to_f16(d);
  *dmin16 = f32_to_f16(dmin);
  const float dq = f16_to_f32(*d16), dminq = f16_to_f32(*dmin16);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(dq > 0 ? std::clamp(nearest(scale[j] / dq), 0, 63) : 0);
    mn[j] = static_cast<uint8_t>(dminq > 0 ? std::clamp(nearest(mins[j] / dminq), 0, 63) : 0);
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const float s = dq * sc[j], m = dminq * mn[j];
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = s > 0 ? std::clamp(nearest((x[32 * j + l] + m) / s), 0, kLevels - 1) : 0;
    }
  }
}

void pack_q4k_quants(const int* q, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0x0F) | ((q[64 * c + 32 + l] & 0x0F) << 4));
    }
  }
}

}  // namespace

// ---- Q4_K ----

void dequantize_row_q4_k(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  int q[kQKK];
  float dl[8], ml[8];
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    unpack_k4_scales(b[i].d, b[i].dmin, b[i].scales, dl, ml);
    unpack_q4k_quants(b[i].qs, q);
    for (int e = 0; e < kQKK; ++e) y[e] = dl[e / 32] * static_cast<float>(q[e]) - ml[e / 32];
  }
}

void quantize_row_q4_k(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  int q[kQKK];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    quantize_k_affine<16>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
    pack_q4k_quants(q, b[i].qs);
  }
}

// ---- Q5_K ----

void dequantize_row_q5_k(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  int q[kQKK];
  float dl[8], ml[8];
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    unpack_k4_scales(b[i].d, b[i].dmin, b[i].scales, dl, ml);
    unpack_q5k_quants(b[i].qs, b[i].qh, q);
    for (int e = 0; e < kQKK; ++e) y[e] = dl[e / 32] * static_cast<float>(q[e]) - ml[e / 32];
  }
}

void quantize_row_q5_k(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  int q[kQKK];
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    quantize_k_affine<32>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
    pack_q4k_quants(q, b[i].qs);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b[i].qh[l] = static_cast<uint8_t>(b[i].qh[l] | (((q[64 * c + l] >> 4) & 1) << (2 * c)) |
                                          (((q[64 * c + 32 + l] >> 4) & 1) << (2 * c + 1)));
      }
    }
  }
}

// ---- Q6_K ----

void dequantize_row_q6_k(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  int q[kQKK];
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d);
    unpack_q6k_quants(b[i], q);
    for (int e = 0; e < kQKK; ++e) y[e] = d * b[i].scales[e / 16] * static_cast<float>(q[e]);
  }
}

void quantize_row_q6_k(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    float scale[16];
    for (int g = 0; g < 16; ++g) {
      float amax = 0, vmax = 0;
      for (int l = 0; l < 16; ++l) {
        const float v = x[16 * g + l];
        if (std::fabs(v) > amax) {
          amax = std::fabs(v);
          vmax = v;
        }
      }
      scale[g] = vmax / -32.0f;  // the extreme value lands on q = -32, the longer side of the range
    }
    float amax_scale = 0;
    for (float s : scale) amax_scale = std::max(amax_scale, std::fabs(s));
    const float d = amax_scale / 127.0f;
    b[i].d = f32_to_f16(d);
    const float dq = f16_to_f32(b[i].d);
    int q[kQKK];
    for (int g = 0; g < 16; ++g) {
      b[i].scales[g] = static_cast<int8_t>(dq > 0 ? std::clamp(nearest(scale[g] / dq), -127, 127) : 0);
      const float s = dq * b[i].scales[g];
      for (int l = 0; l < 16; ++l) {
        q[16 * g + l] = (s != 0 ? std::clamp(nearest(x[16 * g + l] / s), -32, 31) : 0) + 32;
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      const int* y = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((y[l] & 0x0F) | ((y[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((y[l + 32] & 0x0F) | ((y[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((y[l] >> 4) | ((y[l + 32] >> 4) << 2) | ((y[l + 64] >> 4) << 4) |
                                     ((y[l + 96] >> 4) << 6));
      }
    }
  }
}

// ---- Q8_K ----

void dequantize_row_q8_k(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < k / kQKK; ++i, y += kQKK) {
    for (int e = 0; e < kQKK; ++e) y[e] = b[i].d * static_cast<float>(b[i].qs[e]);
  }
}

void quantize_row_q8_k(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    float amax = 0;
    for (int e = 0; e < kQKK; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = d;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) {
        const int v = std::clamp(nearest(x[16 * g + l] * id), -127, 127);
        b[i].qs[16 * g + l] = static_cast<int8_t>(v);
        sum += v;
      }
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

// ---- dot products ----

// One Q4_K/Q5_K super-block (already unpacked to q) against a Q8_K block: 8 sub-blocks
// with 6-bit scales and mins; the mins fold in through the activation's bsums.
template <class Block>
float dot_scaled_k4_block(const Block& bw, const int* q, const BlockQ8_K& bx) {
  int isum = 0, msum = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(bw.scales, j, &sc, &m);
    int s = 0;
    for (int l = 0; l < 32; ++l) s += q[32 * j + l] * bx.qs[32 * j + l];
    isum += sc * s;
    msum += m * (bx.bsums[2 * j] + bx.bsums[2 * j + 1]);
  }
  return bx.d * (f16_to_f32(bw.d) * static_cast<float>(isum) - f16_to_f32(bw.dmin) * static_cast<float>(msum));
}

float vec_dot_q4_k_q8_k_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  int q[kQKK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    unpack_q4k_quants(bw[i].qs, q);
    sum += dot_scaled_k4_block(bw[i], q, bx[i]);
  }
  return sum;
}

float vec_dot_q5_k_q8_k_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  int q[kQKK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    unpack_q5k_quants(bw[i].qs, bw[i].qh, q);
    sum += dot_scaled_k4_block(bw[i], q, bx[i]);
  }
  return sum;
}

float vec_dot_q6_k_q8_k_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ6_K*>(w);
  const auto* bx = static_cast<const BlockQ8_K*>(x);
  int q[kQKK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    unpack_q6k_quants(bw[i], q);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * g + l] * bx[i].qs[16 * g + l];
      isum += bw[i].scales[g] * s;
    }
    sum += bx[i].d * f16_to_f32(bw[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace corvid::ops::cpu
