// Reference (scalar) kernels of the 32-element block formats Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0 and the Q8_1 activation format. These define the arithmetic; the
// SIMD kernels in quants_avx2.cc must agree with them up to float rounding.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "corvid/core/half.h"
#include "corvid/ops/cpu/quants.h"

namespace corvid::ops::cpu {

namespace {

inline int nearest(float v) { return static_cast<int>(std::lrintf(v)); }

inline uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

inline void store_qh(uint8_t* qh, uint32_t v) { std::memcpy(qh, &v, 4); }

// Symmetric blocks (Q4_0, Q5_0): the scale maps the value of largest magnitude to
// -2^(bits-1), the end of the range that has one more level, as ggml does.
template <int kLevels>  // 16 or 32
void quantize_symmetric(const float* x, float* d_out, uint8_t* q) {
  float amax = 0, vmax = 0;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      vmax = x[j];
    }
  }
  const float d = vmax / -static_cast<float>(kLevels / 2);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<uint8_t>(std::clamp(nearest(x[j] * id) + kLevels / 2, 0, kLevels - 1));
  }
  *d_out = d;
}

// Affine blocks (Q4_1, Q5_1): x ~ d*q + min over the block's [min, max].
template <int kLevels>
void quantize_affine(const float* x, float* d_out, float* m_out, uint8_t* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kQK; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(kLevels - 1);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>(std::clamp(nearest((x[j] - lo) * id), 0, kLevels - 1));
  *d_out = d;
  *m_out = lo;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

uint32_t pack_high_bits(const uint8_t* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return qh;
}

// Unpacked weight quants of a block: q[j] for element j.
void unpack_nibbles(const uint8_t* qs, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + 16] = qs[j] >> 4;
  }
}

void unpack_5bit(const uint8_t* qs, const uint8_t* qh_bytes, int* q) {
  const uint32_t qh = load_qh(qh_bytes);
  unpack_nibbles(qs, q);
  for (int j = 0; j < kQK; ++j) q[j] |= static_cast<int>(((qh >> j) & 1) << 4);
}

inline int dot_i8(const int* q, const int8_t* x, int offset) {
  int s = 0;
  for (int j = 0; j < kQK; ++j) s += (q[j] - offset) * x[j];
  return s;
}

}  // namespace

// ---- dequantize ----

void dequantize_row_q4_0(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    unpack_nibbles(b[i].qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j] - 8);
  }
}

void dequantize_row_q4_1(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    unpack_nibbles(b[i].qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j]) + m;
  }
}

void dequantize_row_q5_0(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    unpack_5bit(b[i].qs, b[i].qh, q);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j] - 16);
  }
}

void dequantize_row_q5_1(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  int q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    unpack_5bit(b[i].qs, b[i].qh, q);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j]) + m;
  }
}

void dequantize_row_q8_0(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

void dequantize_row_q8_1(const void* src, float* y, int64_t k) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < k / kQK; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

// ---- quantize ----

void quantize_row_q4_0(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    quantize_symmetric<16>(x, &d, q);
    b[i].d = f32_to_f16(d);
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q4_1(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d, m;
    quantize_affine<16>(x, &d, &m, q);
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(m);
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q5_0(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    quantize_symmetric<32>(x, &d, q);
    b[i].d = f32_to_f16(d);
    pack_nibbles(q, b[i].qs);
    store_qh(b[i].qh, pack_high_bits(q));
  }
}

void quantize_row_q5_1(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d, m;
    quantize_affine<32>(x, &d, &m, q);
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(m);
    pack_nibbles(q, b[i].qs);
    store_qh(b[i].qh, pack_high_bits(q));
  }
}

namespace {
// Shared by Q8_0 and Q8_1: symmetric 8-bit with d = amax / 127; returns sum(q).
int quantize_q8_block(const float* x, float* d_out, int8_t* qs) {
  float amax = 0;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = static_cast<int8_t>(nearest(x[j] * id));
    sum += qs[j];
  }
  *d_out = d;
  return sum;
}
}  // namespace

void quantize_row_q8_0(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    quantize_q8_block(x, &d, b[i].qs);
    b[i].d = f32_to_f16(d);
  }
}

void quantize_row_q8_1(const float* x, void* dst, int64_t k) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    float d;
    const int sum = quantize_q8_block(x, &d, b[i].qs);
    b[i].d = f32_to_f16(d);
    b[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

// ---- dot products (weight row . activation row) ----

float vec_dot_q4_0_q8_0_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  int q[kQK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQK; ++i) {
    unpack_nibbles(bw[i].qs, q);
    sum += f16_to_f32(bw[i].d) * f16_to_f32(bx[i].d) * static_cast<float>(dot_i8(q, bx[i].qs, 8));
  }
  return sum;
}

float vec_dot_q4_1_q8_1_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ4_1*>(w);
  const auto* bx = static_cast<const BlockQ8_1*>(x);
  int q[kQK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQK; ++i) {
    unpack_nibbles(bw[i].qs, q);
    // sum_j (d q_j + m) dx qx_j = d dx sum(q qx) + m * (dx sum(qx)) = ... + m * s.
    sum += f16_to_f32(bw[i].d) * f16_to_f32(bx[i].d) * static_cast<float>(dot_i8(q, bx[i].qs, 0)) +
           f16_to_f32(bw[i].m) * f16_to_f32(bx[i].s);
  }
  return sum;
}

float vec_dot_q5_0_q8_0_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  int q[kQK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQK; ++i) {
    unpack_5bit(bw[i].qs, bw[i].qh, q);
    sum += f16_to_f32(bw[i].d) * f16_to_f32(bx[i].d) * static_cast<float>(dot_i8(q, bx[i].qs, 16));
  }
  return sum;
}

float vec_dot_q5_1_q8_1_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ5_1*>(w);
  const auto* bx = static_cast<const BlockQ8_1*>(x);
  int q[kQK];
  float sum = 0;
  for (int64_t i = 0; i < k / kQK; ++i) {
    unpack_5bit(bw[i].qs, bw[i].qh, q);
    sum += f16_to_f32(bw[i].d) * f16_to_f32(bx[i].d) * static_cast<float>(dot_i8(q, bx[i].qs, 0)) +
           f16_to_f32(bw[i].m) * f16_to_f32(bx[i].s);
  }
  return sum;
}

float vec_dot_q8_0_q8_0_scalar(const void* w, const void* x, int64_t k) {
  const auto* bw = static_cast<const BlockQ8_0*>(w);
  const auto* bx = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < k / kQK; ++i) {
    int s = 0;
    for (int j = 0; j < kQK; ++j) s += bw[i].qs[j] * bx[i].qs[j];
    sum += f16_to_f32(bw[i].d) * f16_to_f32(bx[i].d) * static_cast<float>(s);
  }
  return sum;
}

}  // namespace corvid::ops::cpu
