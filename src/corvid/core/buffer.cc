#include "corvid/core/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace corvid {

Buffer::Buffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded);
}

Buffer::~Buffer() { std::free(data_); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

OwnedTensor::OwnedTensor(DType t, std::initializer_list<int64_t> dims) {
  tensor = Tensor(t, dims, nullptr);
  buffer = Buffer(tensor.nbytes());
  tensor.data = buffer.data();
}

}  // namespace corvid
