// Helpers shared by the CUDA tests: host <-> GPU copies of test tensors.
#pragma once

#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"

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

}  // namespace corvid::testing
