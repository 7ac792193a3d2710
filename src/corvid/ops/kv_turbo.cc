#include "corvid/ops/kv_turbo.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/ops/turbo_codebooks.h"

namespace corvid::ops::kv_turbo {

// Lloyd's iteration on the density ∝ (1 - x²/d)^((d-3)/2) over [-√d, √d], integrated on
// a fine grid: cells are split at centroid midpoints, each centroid moves to its cell's
// mean, until nothing moves.
DerivedCodebook derive_codebook(int bits) {
  CORVID_CHECK(bits >= 2 && bits <= 4, "kv_turbo: ", bits, "-bit codes (2, 3 or 4)");
  const int levels = 1 << bits, d = kGroup, grid = 20001;
  const double r = std::sqrt(static_cast<double>(d)), dx = 2 * r / (grid - 1);
  std::vector<double> x(grid), w(grid);
  double total = 0;
  for (int i = 0; i < grid; ++i) {
    x[i] = -r + dx * i;
    const double t = std::max(0.0, 1 - x[i] * x[i] / d);
    w[i] = std::pow(t, (d - 3) / 2.0);
    total += w[i];
  }
  for (double& v : w) v /= total;
  // f(i, k) for every grid point i, with k the cell of centroids c it falls in (cells
  // split at the midpoints of neighbouring centroids).
  auto each_in_cell = [&](const std::vector<double>& c, auto&& f) {
    int k = 0;
    for (int i = 0; i < grid; ++i) {
      while (k + 1 < levels && x[i] > (c[k] + c[k + 1]) / 2) ++k;
      f(i, k);
    }
  };
  std::vector<double> c(levels);
  for (int k = 0; k < levels; ++k) c[k] = -2.5 + 5.0 * (k + 0.5) / levels;  // spread over ±2.5σ
  std::vector<double> sum(levels), mass(levels);
  for (int iter = 0; iter < 5000; ++iter) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(mass.begin(), mass.end(), 0.0);
    each_in_cell(c, [&](int i, int k) {
      sum[k] += w[i] * x[i];
      mass[k] += w[i];
    });
    double moved = 0;
    for (int j = 0; j < levels; ++j) {
      const double next = mass[j] > 0 ? sum[j] / mass[j] : c[j];
      moved = std::max(moved, std::abs(next - c[j]));
      c[j] = next;
    }
    if (moved < 1e-10) break;
  }
  // Symmetric by construction of the density; made exact so that -x codes as x mirrored.
  for (int j = 0; j < levels / 2; ++j) {
    const double m = (c[levels - 1 - j] - c[j]) / 2;
    c[j] = -m;
    c[levels - 1 - j] = m;
  }
  DerivedCodebook t;
  t.centroids = c;
  for (int j = 0; j + 1 < levels; ++j) t.bounds.push_back((c[j] + c[j + 1]) / 2);
  each_in_cell(c, [&](int i, int k) { t.distortion += w[i] * (x[i] - c[k]) * (x[i] - c[k]); });
  return t;
}

namespace {

void check_groups(int64_t n) {
  CORVID_CHECK(n >= 0 && n % kGroup == 0, "kv_turbo: ", n, " values are not whole groups of ", kGroup);
}

// The code of u: how many cell boundaries lie below it.
int code_of(const Codebook& cb, float u) {
  int k = 0;
  for (float b : cb.bounds) k += u > b ? 1 : 0;
  return k;
}

}  // namespace

const Codebook& codebook(int bits) {
  CORVID_CHECK(bits >= 2 && bits <= 4, "kv_turbo: ", bits, "-bit codes (2, 3 or 4)");
  static constexpr Codebook kBooks[] = {
      {kCentroids2, kBounds2, kDistortion2},
      {kCentroids3, kBounds3, kDistortion3},
      {kCentroids4, kBounds4, kDistortion4},
  };
  return kBooks[bits - 2];
}

bool is_turbo(DType t) { return t == DType::T4G64 || t == DType::T3G64 || t == DType::T2G64; }

int bits_of(DType t) {
  switch (t) {
    case DType::T4G64: return 4;
    case DType::T3G64: return 3;
    case DType::T2G64: return 2;
    default: fail("kv_turbo: ", dtype_name(t), " is not a TurboQuant format");
  }
}

float group_sum(const float* p) {
  float a[32];
  for (int j = 0; j < 32; ++j) a[j] = p[j] + p[j + 32];
  for (int k = 16; k >= 1; k /= 2)
    for (int j = 0; j < k; ++j) a[j] = a[j] + a[j + k];
  return a[0];
}

// (This file is compiled with -ffp-contract=off: a fused multiply-add would give other
// bits than the GPU's separately rounded products.)
void quantize(int bits, const float* x, int64_t n, uint8_t* dst) {
  const Codebook& cb = codebook(bits);  // checks bits
  check_groups(n);
  const int code_bytes = kGroup * bits / 8;
  float sq[kGroup];
  int codes[kGroup];
  for (int64_t g = 0; g < n / kGroup; ++g, x += kGroup, dst += group_bytes(bits)) {
    for (int j = 0; j < kGroup; ++j) sq[j] = x[j] * x[j];
    const float norm = std::sqrt(group_sum(sq));
    std::memset(dst, 0, static_cast<size_t>(code_bytes));
    float scale = 0;
    if (norm > 0) {
      const float to_unit = 8.0f / norm;  // sqrt(kGroup) / |x|
      for (int j = 0; j < kGroup; ++j) {
        codes[j] = code_of(cb, x[j] * to_unit);
        const float c = cb.centroids[static_cast<size_t>(codes[j])];
        sq[j] = c * c;
      }
      scale = norm / std::sqrt(group_sum(sq));
      for (int j = 0; j < kGroup; ++j) {
        const int bit = j * bits, code = codes[j];
        dst[bit / 8] = static_cast<uint8_t>(dst[bit / 8] | (code << (bit % 8)));
        if (bit % 8 + bits > 8) dst[bit / 8 + 1] = static_cast<uint8_t>(dst[bit / 8 + 1] | (code >> (8 - bit % 8)));
      }
    }
    std::memcpy(dst + code_bytes, &scale, sizeof scale);
  }
}

void dequantize(int bits, const uint8_t* src, int64_t n, float* out) {
  const Codebook& cb = codebook(bits);  // checks bits
  check_groups(n);
  const int code_bytes = kGroup * bits / 8, mask = (1 << bits) - 1;
  for (int64_t g = 0; g < n / kGroup; ++g, src += group_bytes(bits), out += kGroup) {
    float scale;
    std::memcpy(&scale, src + code_bytes, sizeof scale);
    for (int j = 0; j < kGroup; ++j) {
      const int bit = j * bits;
      int code = src[bit / 8] >> (bit % 8);
      if (bit % 8 + bits > 8) code |= src[bit / 8 + 1] << (8 - bit % 8);
      out[j] = scale * cb.centroids[static_cast<size_t>(code & mask)];
    }
  }
}

}  // namespace corvid::ops::kv_turbo
