// Buffer: owning, 64-byte aligned host memory. Move-only.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "corvid/core/tensor.h"

namespace corvid {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);  // zero-filled
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A tensor together with the buffer that owns its data.
struct OwnedTensor {
  Buffer buffer;
  Tensor tensor;
  OwnedTensor() = default;
  OwnedTensor(DType t, std::initializer_list<int64_t> dims);
  template <class T> T* ptr() const { return tensor.ptr<T>(); }
};

}  // namespace corvid
