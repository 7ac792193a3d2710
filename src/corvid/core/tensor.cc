#include "corvid/core/tensor.h"

#include "corvid/core/error.h"

namespace corvid {

Tensor::Tensor(DType t, std::initializer_list<int64_t> dims, void* ptr, Device dev)
    : dtype(t), device(dev), data(ptr) {
  CORVID_CHECK(dims.size() <= kMaxDims, "tensor: too many dimensions (", dims.size(), ")");
  for (int64_t d : dims) {
    CORVID_CHECK(d >= 0, "tensor: negative dimension");
    shape[static_cast<size_t>(ndim++)] = d;
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> dims) const {
  Tensor t(dtype, dims, data, device);
  CORVID_CHECK(t.numel() == numel(), "tensor: cannot reshape ", shape_str(), " to ", t.shape_str());
  return t;
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[static_cast<size_t>(i)]);
  }
  return s + "]";
}

}  // namespace corvid
