// safetensors reader: memory-maps the file, validates the JSON header against the
// file and exposes each tensor as a zero-copy view. Layout:
//   u64 N (little-endian) | N bytes of JSON header | data section
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) plus an optional "__metadata__" object of
// strings. Every failure is a corvid::Error "<path>: <problem>". A file whose header
// is not padded (older writers) leaves tensors unaligned for their element type: those
// are copied once into aligned memory the file object owns, and a log line says so.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/tensor.h"
#include "corvid/formats/weights.h"

namespace corvid {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;      // as in the header: "BF16", "I64", …
  std::optional<DType> dtype;  // unset for types corvid has no DType for (I64, F64, U8, …)
  std::vector<int64_t> shape;  // outermost-first, 0 to 4 dims
  uint64_t begin = 0, end = 0; // byte range within the data section
  Tensor view;                 // points into the mapping (or its aligned copy); data only, when dtype is unset
};

class SafetensorsFile {
 public:
  // Header lengths above this are refused (the reference implementation uses the same 100 MB cap).
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (fuzzing, tests); `name` stands in for the path in errors.
  static std::shared_ptr<SafetensorsFile> parse(std::shared_ptr<const void> owner, const uint8_t* data, size_t size,
                                                const std::string& name);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // __metadata__
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }        // in data order
  const SafetensorsTensor* find(const std::string& name) const;
  std::shared_ptr<const void> owner() const { return owner_; }
  // Bytes of the tensors that were not aligned in the file and were copied.
  uint64_t copied_bytes() const { return copied_bytes_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::shared_ptr<const void> owner_;
  std::vector<Buffer> copies_;  // the aligned copies of unaligned tensors
  uint64_t copied_bytes_ = 0;
};

// Loads a Hugging Face checkpoint folder: `model.safetensors`, or the shards named
// by `model.safetensors.index.json` (its weight_map; every shard must exist and hold
// the tensors the index assigns to it). Weights must be F32, F16, BF16 (or I32).
WeightSet load_safetensors_checkpoint(const std::string& dir);

}  // namespace corvid
