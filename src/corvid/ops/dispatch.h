// What every ops:: front file (ops.cc, moe.cc) shares: the device check, the F32 check
// and the dispatch to a backend. Internal to ops/.
#pragma once

#include <initializer_list>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/core/tensor.h"
#include "corvid/ops/cpu/cpu_ops.h"
#ifdef CORVID_HAVE_CUDA
#include "corvid/ops/cuda/cuda_ops.h"
#endif

namespace corvid::ops {

inline bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Weight dtypes matmul/embedding accept: float types and stored block formats (not activation formats).
inline bool is_weight_dtype(DType t) {
  return is_float_dtype(t) || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 ||
         t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// The GPU row layouts (core/dtype.h), which only the CUDA backend reads.
inline bool is_gpu_row_layout(DType t) {
  return t == DType::Q4_0R || t == DType::Q4_1R || t == DType::Q8_0R || t == DType::Q4_KR;
}

// is_weight_dtype, plus the GPU row layouts on CUDA.
inline bool is_weight_dtype_on(DType t, Device device) {
  return is_weight_dtype(t) || (device == Device::CUDA && is_gpu_row_layout(t));
}

// Whether two tensors' bytes overlap.
inline bool overlaps(const Tensor& a, const Tensor& b) {
  const char* a0 = static_cast<const char*>(a.data);
  const char* b0 = static_cast<const char*>(b.data);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The device all of a call's tensors are on; mixing devices is an error.
inline Device common_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t) continue;
#ifndef CORVID_HAVE_CUDA
    if (t->device != Device::CPU) fail("ops::", op, ": tensor on CUDA but corvid was not built with CUDA");
#endif
    if (!first) first = t;
    CORVID_CHECK(t->device == first->device, "ops::", op, ": tensors on different devices (", device_name(first->device),
                 " and ", device_name(t->device), ")");
  }
  return first ? first->device : Device::CPU;
}

// Runs the CUDA backend's version of an op when the tensors are on the GPU.
#ifdef CORVID_HAVE_CUDA
#define CORVID_DISPATCH(device, op, ...)  \
  do {                                    \
    if ((device) == Device::CUDA) {       \
      cuda::OpScope op_scope_(#op);       \
      cuda::op(__VA_ARGS__);              \
      return;                             \
    }                                     \
    cpu::op(__VA_ARGS__);                 \
  } while (0)
#else
#define CORVID_DISPATCH(device, op, ...) \
  do {                                   \
    (void)(device);                      \
    cpu::op(__VA_ARGS__);                \
  } while (0)
#endif

inline void check_f32(const char* op, const char* name, const Tensor& t) {
  CORVID_CHECK(t.dtype == DType::F32, "ops::", op, ": ", name, " must be F32, got ", dtype_name(t.dtype));
  CORVID_CHECK(t.data != nullptr || t.numel() == 0, "ops::", op, ": ", name, " has no data");
}

}  // namespace corvid::ops
