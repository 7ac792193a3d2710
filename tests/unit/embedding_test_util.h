// Shared by the embedding tests (CPU and CUDA): how close a vector is to an oracle's.
#pragma once

#include <cmath>
#include <vector>

namespace corvid::testing {

inline double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += b[i] * b[i];
  }
  return dot / std::sqrt(na * nb);
}

}  // namespace corvid::testing
