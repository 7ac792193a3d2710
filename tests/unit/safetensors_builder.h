// Test helper: builds safetensors images in memory (valid ones, or with a
// hand-written header for corruption cases) and scratch folders on disk.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

namespace corvid::testing {

struct SafetensorsBuilder {
  nlohmann::json header = nlohmann::json::object();
  uint64_t next = 0;

  // Appends a tensor of `elem_bytes`-byte elements right after the previous one.
  SafetensorsBuilder& add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                          int elem_bytes) {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {next, next + n * elem_bytes}}};
    next += n * static_cast<uint64_t>(elem_bytes);
    return *this;
  }

  // Header padded with spaces to a multiple of 8 (as the reference writer does), then
  // `data_bytes` of data (default: what the tensors claim) filled with the byte index.
  std::vector<uint8_t> build(std::optional<uint64_t> data_bytes = std::nullopt) const {
    return image(header.dump(), data_bytes.value_or(next));
  }
  static std::vector<uint8_t> image(std::string text, uint64_t data_bytes) {
    while ((8 + text.size()) % 8) text += ' ';
    // One allocation and plain copies: GCC 12 -O3 warns falsely on vector::insert here.
    uint64_t n = text.size();
    std::vector<uint8_t> b(8 + n + data_bytes);
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, text.data(), n);
    for (uint64_t i = 0; i < data_bytes; ++i) b[8 + n + i] = static_cast<uint8_t>(i);
    return b;
  }
};

// A fresh empty folder, removed with its contents at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("corvid_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream(file(name), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                       static_cast<std::streamsize>(bytes.size()));
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace corvid::testing
