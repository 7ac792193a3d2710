// Reading the oracles' raw arrays: a file's bytes, and little-endian float32 / float64 /
// int32 arrays (numpy's tofile()).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace corvid::fixtures {

inline std::vector<uint8_t> bytes_of(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

template <class T>
std::vector<T> array_of(const std::filesystem::path& p) {
  const std::vector<uint8_t> b = bytes_of(p);
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace corvid::fixtures
