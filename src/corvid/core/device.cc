#include "corvid/core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "corvid/core/error.h"

#ifdef CORVID_HAVE_CUDA
namespace corvid::ops::cuda {
// Implemented by the CUDA backend (ops/cuda/backend.cu). available() never throws.
bool available();
DeviceBackend& backend();
}  // namespace corvid::ops::cuda
#endif

namespace corvid {

namespace {

// Host memory, 64-byte aligned and zero-filled like Buffer, so CPU tensors from a
// DeviceBuffer behave exactly like the OwnedTensors they replace.
class HostBackend final : public DeviceBackend {
 public:
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return p;
  }
  void release(void* ptr) noexcept override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_within(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}
  std::string description() const override { return "CPU"; }

};

}  // namespace

bool cuda_available() {
#ifdef CORVID_HAVE_CUDA
  return ops::cuda::available();
#else
  return false;
#endif
}

DeviceBackend& device_backend(Device device) {
  if (device == Device::CPU) {
    static HostBackend host;
    return host;
  }
#ifdef CORVID_HAVE_CUDA
  return ops::cuda::backend();
#else
  fail("device cuda: corvid was built without CUDA (configure with -DCORVID_CUDA=ON)");
#endif
}

const char* device_name(Device device) { return device == Device::CUDA ? "cuda" : "cpu"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "auto") return cuda_available() ? Device::CUDA : Device::CPU;
  if (name == "cuda") {
#ifndef CORVID_HAVE_CUDA
    fail("--device cuda: corvid was built without CUDA (configure with -DCORVID_CUDA=ON)");
#else
    CORVID_CHECK(cuda_available(), "--device cuda: no usable CUDA GPU was found");
    return Device::CUDA;
#endif
  }
  fail("--device ", name, ": expected auto, cuda or cpu");
}

void* DeviceBackend::allocate_host_mapped(size_t) {
  fail(description(), ": no host memory its kernels can read in place (weights offloaded to host memory need a GPU)");
}

DeviceBuffer::DeviceBuffer(Device device, size_t bytes, Residency residency)
    : device_(device), residency_(residency), size_(bytes) {
  if (!bytes) return;
  DeviceBackend& b = device_backend(device);
  data_ = residency == Residency::HostMapped ? b.allocate_host_mapped(bytes) : b.allocate(bytes);
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() noexcept {
  if (data_ && residency_ == Residency::HostMapped) {
    device_backend(device_).release_host_mapped(data_);
  } else if (data_) {
    device_backend(device_).release(data_);
  }
  data_ = nullptr;
  size_ = 0;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      residency_(other.residency_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    residency_ = other.residency_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceTensor::DeviceTensor(Device device, DType t, std::initializer_list<int64_t> dims) {
  tensor = Tensor(t, dims, nullptr, device);
  buffer = DeviceBuffer(device, tensor.nbytes());
  tensor.data = buffer.data();
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::CPU && src_device == Device::CPU) {
    std::memcpy(dst, src, bytes);
  } else if (dst_device == Device::CPU) {
    device_backend(src_device).copy_to_host(dst, src, bytes);
  } else if (src_device == Device::CPU) {
    device_backend(dst_device).copy_to_device(dst, src, bytes);
  } else {
    device_backend(dst_device).copy_within(dst, src, bytes);
  }
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  CORVID_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy_tensor: ", dtype_name(src.dtype), " ",
               src.shape_str(), " into ", dtype_name(dst.dtype), " ", dst.shape_str());
  copy_bytes(dst.data, dst.device, src.data, src.device, src.nbytes());
}

void synchronize(Device device) {
  if (device != Device::CPU) device_backend(device).synchronize();
}

}  // namespace corvid
