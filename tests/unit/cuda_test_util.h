// Helpers shared by the CUDA tests: host <-> GPU copies of test tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/ops/ops.h"

namespace corvid::testing {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU"

// A GPU copy of a host tensor (same dtype and shape).
inline DeviceTensor to_gpu(const Tensor& host) {
  DeviceTensor d;
  d.buffer = DeviceBuffer(Device::CUDA, host.nbytes());
  d.tensor = host;
  d.tensor.device = Device::CUDA;
  d.tensor.data = d.buffer.data();
  copy_tensor(d.tensor, host);
  return d;
}

// The values of an F32 GPU tensor.
inline std::vector<float> to_host(const Tensor& dev) {
  std::vector<float> out(static_cast<size_t>(dev.numel()));
  Tensor h = dev;
  h.device = Device::CPU;
  h.data = out.data();
  copy_tensor(h, dev);
  return out;
}

// max |a - b| / max(max |b|, 1e-30); infinite when a holds a non-finite value.
inline double rel_err(const std::vector<float>& a, const float* b, size_t n) {
  double diff = 0, mag = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return diff / mag;
}

// Sets the process-wide numerics for one scope (back to the default, Fast, after).
struct NumericsScope {
  explicit NumericsScope(ops::QuantizedMatmul mode) { ops::set_quantized_matmul(mode); }
  ~NumericsScope() { ops::set_quantized_matmul(ops::QuantizedMatmul::Fast); }
};

}  // namespace corvid::testing
