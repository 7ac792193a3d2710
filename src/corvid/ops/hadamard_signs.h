// The signs D of ops::hadamard_rotate (x -> H D x / sqrt(d)): a fixed pseudo-random +-1
// per dimension, splitmix64 of the index, so keys rotated by one process (or device)
// read the same in another. Shared by the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CORVID_HOST_DEVICE __host__ __device__
#else
#define CORVID_HOST_DEVICE
#endif

namespace corvid::ops {

CORVID_HOST_DEVICE inline float hadamard_sign(int64_t i) {
  uint64_t z = static_cast<uint64_t>(i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return ((z ^ (z >> 31)) & 1) ? -1.0f : 1.0f;
}

}  // namespace corvid::ops

#undef CORVID_HOST_DEVICE
