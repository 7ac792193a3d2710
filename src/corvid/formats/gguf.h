// GGUF v2/v3 reader: memory-maps the file, parses and validates the header,
// metadata and tensor infos, and exposes each tensor as a zero-copy view.
// Every failure is a corvid::Error "<path>: <problem>".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "corvid/core/mapped_file.h"
#include "corvid/core/tensor.h"

namespace corvid {

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

// One metadata value. Integers keep their signedness; floats widen to double.
struct GgufValue {
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;
  uint32_t type = 0;  // the GGUF value type id as stored (GGUF_TYPE_UINT8 = 0 …)
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost-first (GGUF stores ne innermost-first; reversed here)
  uint64_t offset = 0;         // from the start of the data section
  Tensor view;                 // points into the mapping
};

class GgufFile {
 public:
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (for fuzzing and tests); `name` stands in for the path in errors.
  static std::shared_ptr<GgufFile> parse(std::shared_ptr<const void> owner, const uint8_t* data, size_t size,
                                         const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }

  const GgufValue* find(const std::string& key) const;  // nullptr when absent
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: throw corvid::Error naming the key when absent or of another type
  // (any integer type converts to int64 when it fits; any int or float converts to double).
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  // Same, with a default when the key is absent (still throws on a type mismatch).
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Keeps the mapped bytes alive for views handed out.
  std::shared_ptr<const void> owner() const { return owner_; }

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::shared_ptr<const void> owner_;
};

}  // namespace corvid
