// Indices: an int32 array a step hands to ops (token ids, positions, KV rows, block
// tables, each query's sequence). It always has the host values — kernels on the
// CPU read them, and a GPU op may plan its launches from them — and may also say
// where the same values already are in device memory (the runner uploads a step's
// inputs once, in one copy; a recorded step replays reading that buffer). Without
// a device copy, a GPU op uploads the values itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace corvid::ops {

struct Indices {
  std::span<const int32_t> host;
  const int32_t* device = nullptr;  // the same values on the device, or null

  Indices() = default;
  Indices(std::span<const int32_t> values, const int32_t* on_device = nullptr) : host(values), device(on_device) {}
  Indices(const std::vector<int32_t>& values) : host(values) {}

  size_t size() const { return host.size(); }
  bool empty() const { return host.empty(); }
  const int32_t* data() const { return host.data(); }
  int32_t operator[](size_t i) const { return host[i]; }
  auto begin() const { return host.begin(); }
  auto end() const { return host.end(); }
  operator std::span<const int32_t>() const { return host; }
  // Elements [offset, offset + count), host and device alike.
  Indices slice(size_t offset, size_t count) const {
    return {host.subspan(offset, count), device ? device + offset : nullptr};
  }
};

}  // namespace corvid::ops
