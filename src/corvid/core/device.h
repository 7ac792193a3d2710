// Device memory: where a tensor's bytes live and who frees them. Tensor stays a
// non-owning view; DeviceBuffer owns bytes on one device (host memory for CPU,
// cudaMalloc'd memory for CUDA — never managed memory). Core knows no CUDA: the
// CUDA backend implements DeviceBackend (ops/cuda/backend.cu) and device.cc asks
// for it only in builds with CORVID_HAVE_CUDA, so a CPU-only build has no CUDA
// dependency at all.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "corvid/core/tensor.h"

namespace corvid {

struct MemoryInfo {
  size_t free_bytes = 0, total_bytes = 0;  // both 0: the device cannot say (the CPU)
};

// What a device must provide for memory. Copies are ordered with the device's
// kernels (one stream per device); copy_to_host returns once the data is there.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual void* allocate(size_t bytes) = 0;          // zero-filled; throws corvid::Error when out of memory
  virtual void release(void* ptr) noexcept = 0;
  // Pinned host memory the device's kernels read and write in place (zero-copy, over
  // the host link): weights kept out of device memory (--moe-offload). The pointer is
  // valid both in kernels and in copies to and from this device. Zero-filled; throws
  // corvid::Error when the host cannot pin that much. The CPU has no such memory.
  virtual void* allocate_host_mapped(size_t bytes);
  virtual void release_host_mapped(void* ptr) noexcept { (void)ptr; }
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;  // both on this device
  virtual void synchronize() = 0;
  virtual std::string description() const = 0;  // "NVIDIA H200 (sm_90, 139.8 GiB)"
  virtual MemoryInfo memory_info() const { return {}; }

  // Step recording (CUDA graphs): the work queued between begin_capture() and
  // end_capture() is recorded, not run; replay(id) runs it again. A recorded step's
  // inputs must be in device memory the caller refills before each replay
  // (engine/runner.cc uploads them; ops read them through ops::Indices::device). A
  // recording is only valid while layout_generation() is unchanged (the backend's
  // own buffers have not moved).
  virtual bool supports_capture() const { return false; }
  virtual uint64_t layout_generation() const { return 0; }
  virtual void begin_capture() {}
  virtual int64_t end_capture() { return -1; }  // the recording's id
  virtual void abort_capture() noexcept {}      // after an error during capture
  virtual void replay(int64_t id) {}
  virtual void drop(int64_t id) noexcept {}
};

// True when this build has CUDA and a usable GPU is present (never throws).
bool cuda_available();
// The backend of a device; throws corvid::Error for CUDA when cuda_available() is false.
DeviceBackend& device_backend(Device device);
const char* device_name(Device device);  // "cpu" / "cuda"
// "auto" (CUDA when available, else CPU), "cuda" or "cpu"; throws on anything else
// or when "cuda" is asked for and is not available.
Device parse_device(const std::string& name);

// Where a DeviceBuffer's bytes are: the device's own memory, or pinned host memory its
// kernels read in place (DeviceBackend::allocate_host_mapped).
enum class Residency { Device, HostMapped };

// Owning device memory. Move-only; frees through its device's backend.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes, Residency residency = Residency::Device);  // zero-filled
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }

 private:
  void reset() noexcept;
  Device device_ = Device::CPU;
  Residency residency_ = Residency::Device;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A tensor together with the device buffer that owns its data.
struct DeviceTensor {
  DeviceBuffer buffer;
  Tensor tensor;
  DeviceTensor() = default;
  DeviceTensor(Device device, DType t, std::initializer_list<int64_t> dims);
  // A view of the first n rows (outermost dim) of a 2-D tensor.
  Tensor rows(int64_t n) const { return Tensor(tensor.dtype, {n, tensor.cols()}, tensor.data, tensor.device); }
};

// Copies `bytes` between any two places (host or device, either direction).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Copies src's bytes into dst (equal dtype and element count, any devices).
void copy_tensor(const Tensor& dst, const Tensor& src);
// Waits for the device's queued work (no-op on the CPU).
void synchronize(Device device);

}  // namespace corvid
