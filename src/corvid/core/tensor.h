// Tensor: a non-owning view of contiguous row-major data. Ownership lives in a
// Buffer (core/buffer.h) or a memory-mapped file (core/mapped_file.h); a Tensor
// never frees anything. Shapes are outermost-first: a weight of an nn.Linear
// with out_features m and in_features k is {m, k}, as in PyTorch.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "corvid/core/dtype.h"

namespace corvid {

enum class Device : uint8_t { CPU, CUDA };

struct Tensor {
  static constexpr int kMaxDims = 4;

  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  void* data = nullptr;

  Tensor() = default;
  Tensor(DType t, std::initializer_list<int64_t> dims, void* ptr, Device dev = Device::CPU);

  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? ndim + i : i)]; }
  int64_t numel() const;
  int64_t cols() const { return ndim ? shape[static_cast<size_t>(ndim - 1)] : 1; }  // innermost
  int64_t rows() const { return ndim ? numel() / cols() : 1; }
  size_t row_bytes() const { return bytes_for(dtype, cols()); }
  size_t nbytes() const { return bytes_for(dtype, numel()); }

  template <class T> T* ptr() const { return static_cast<T*>(data); }
  // Start of row r (over all outer dims flattened).
  template <class T = void> T* row(int64_t r) const {
    return reinterpret_cast<T*>(static_cast<char*>(data) + static_cast<size_t>(r) * row_bytes());
  }
  // The same data seen with another shape of equal element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const;
  std::string shape_str() const;  // "[4096, 128]"
};

}  // namespace corvid
