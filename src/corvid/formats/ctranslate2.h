// CTranslate2's model.bin (the files faster-whisper loads), read into tensors.
// Layout, all little-endian:
//   u32 binary_version (<= 6) | str spec_name | u32 spec_revision (version >= 2)
//   u32 n | n × (str name | u8 rank | u32 dims[rank] | u8 dtype | u32 bytes | data)
//   u32 n_aliases | n_aliases × (str alias | str target)      (version >= 3)
// where str is u16 length (including a trailing NUL) then the bytes. dtype is
// CTranslate2's DataType: 0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16. Data is not aligned
// in the file, so every tensor is copied once into aligned memory the file object owns.
// Quantized matrices carry a "<name>_scale" beside them; corvid has no reader for those
// yet, so a quantized model is refused by name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/tensor.h"

namespace corvid {

struct Ct2Variable {
  std::string name;
  std::vector<int64_t> shape;  // outermost first; empty for a scalar
  int dtype_id = 0;            // CTranslate2's DataType
  // The data. Its dtype means something for F32/F16/BF16/I32 only; I8 and I16 variables
  // (flags, head counts) are read with Ct2File::scalar().
  Tensor view;
};

class Ct2File {
 public:
  static constexpr uint32_t kMaxVersion = 6;
  static std::shared_ptr<Ct2File> open(const std::string& path);
  // Parses an in-memory image (fuzzing, tests); `name` stands in for the path in errors.
  static std::shared_ptr<Ct2File> parse(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& path() const { return path_; }
  const std::string& spec() const { return spec_; }  // "WhisperSpec"
  uint32_t version() const { return version_; }
  const std::map<std::string, Ct2Variable>& variables() const { return variables_; }
  const std::map<std::string, std::string>& aliases() const { return aliases_; }
  // The variable or alias target named `name`; nullptr when absent.
  const Ct2Variable* find(const std::string& name) const;
  // An integer scalar variable (i8, i16 or i32); throws when absent or not a scalar.
  int64_t scalar(const std::string& name) const;

 private:
  Ct2File() = default;
  std::string path_, spec_;
  uint32_t version_ = 0;
  std::map<std::string, Ct2Variable> variables_;
  std::map<std::string, std::string> aliases_;
  Buffer data_;  // every variable's bytes, each at a 64-byte aligned offset
};

}  // namespace corvid
