// Device helpers shared by the GEMV kernels of matmul.cu and gemv_tiled.cu.
#pragma once

#include <cstdint>

#include "corvid/core/dtype.h"
#include "corvid/ops/cuda/gemv.h"
#include "corvid/ops/cuda/quant.cuh"

namespace corvid::ops::cuda {

__device__ __forceinline__ float bias_at(const void* bias, DType t, int64_t i) {
  if (!bias) return 0.0f;
  if (t == DType::F32) return static_cast<const float*>(bias)[i];
  const uint16_t v = static_cast<const uint16_t*>(bias)[i];
  return t == DType::F16 ? half_to_float(v) : bf16_to_float(v);
}

}  // namespace corvid::ops::cuda
