// A read-only memory-mapped file. Weights are used in place from the mapping
// (zero-copy); the mapping lives as long as any owner holds the shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace corvid {

class MappedFile {
 public:
  // Throws corvid::Error("<path>: <reason>") when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace corvid
