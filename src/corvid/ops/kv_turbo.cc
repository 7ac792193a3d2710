#include "corvid/ops/kv_turbo.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/error.h"

namespace corvid::ops::kv_turbo {

namespace {

struct Table {
  std::vector<float> centroids, bounds;
  double distortion = 0;
};

// Lloyd's iteration on the density ∝ (1 - x²/d)^((d-3)/2) over [-√d, √d], integrated on
// a fine grid: cells are split at centroid midpoints, each centroid moves to its cell's
// mean, until nothing moves.
Table lloyd_max(int bits) {
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
  Table t;
  for (double v : c) t.centroids.push_back(static_cast<float>(v));
  for (int j = 0; j + 1 < levels; ++j) t.bounds.push_back(static_cast<float>((c[j] + c[j + 1]) / 2));
  each_in_cell(c, [&](int i, int k) { t.distortion += w[i] * (x[i] - c[k]) * (x[i] - c[k]); });
  return t;
}

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
  static const std::array<Table, 3> tables = {lloyd_max(2), lloyd_max(3), lloyd_max(4)};
  static const std::array<Codebook, 3> books = [] {
    std::array<Codebook, 3> b{};
    for (size_t i = 0; i < 3; ++i) b[i] = {tables[i].centroids, tables[i].bounds, tables[i].distortion};
    return b;
  }();
  return books[static_cast<size_t>(bits - 2)];
}

void quantize(int bits, const float* x, int64_t n, uint8_t* dst) {
  const Codebook& cb = codebook(bits);  // checks bits
  check_groups(n);
  const int code_bytes = kGroup * bits / 8;
  for (int64_t g = 0; g < n / kGroup; ++g, x += kGroup, dst += group_bytes(bits)) {
    double norm2 = 0;
    for (int j = 0; j < kGroup; ++j) norm2 += static_cast<double>(x[j]) * x[j];
    std::memset(dst, 0, static_cast<size_t>(code_bytes));
    float scale = 0;
    if (norm2 > 0) {
      const double norm = std::sqrt(norm2), to_unit = std::sqrt(static_cast<double>(kGroup)) / norm;
      double c2 = 0;
      for (int j = 0; j < kGroup; ++j) {
        const int code = code_of(cb, static_cast<float>(x[j] * to_unit));
        const double c = cb.centroids[static_cast<size_t>(code)];
        c2 += c * c;
        const int bit = j * bits;
        dst[bit / 8] = static_cast<uint8_t>(dst[bit / 8] | (code << (bit % 8)));
        if (bit % 8 + bits > 8) dst[bit / 8 + 1] = static_cast<uint8_t>(dst[bit / 8 + 1] | (code >> (8 - bit % 8)));
      }
      scale = static_cast<float>(norm / std::sqrt(c2));
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
