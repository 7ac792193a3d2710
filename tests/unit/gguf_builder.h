// Test helper: serialises a GGUF image in memory so tests can build valid files
// and corrupt exactly one field. Shared by the GGUF tests and the fuzz seed tool.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace corvid::testing {

using Bytes = std::vector<uint8_t>;

template <class T> void put(Bytes& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}
inline void put_str(Bytes& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// GGUF value type ids.
enum : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };

struct GgufBuilder {
  struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;  // innermost-first, as stored
    uint32_t type = 0;
    size_t nbytes = 0;
    std::optional<uint64_t> offset;  // auto-assigned (aligned, packed) when unset
    uint8_t fill = 0;
  };

  uint32_t version = 3;
  uint64_t alignment = 32;  // used for layout; write general.alignment yourself to change the file's
  std::optional<uint64_t> tensor_count, kv_count;  // override the counts written
  Bytes kv;
  uint64_t n_kv = 0;
  std::vector<TensorSpec> tensors;
  size_t trailing_bytes = 0;  // extra zeros after the data section

  // Raw key-value: the caller supplies the encoded value bytes.
  GgufBuilder& raw(const std::string& key, uint32_t type, const Bytes& value) {
    put_str(kv, key);
    put<uint32_t>(kv, type);
    kv.insert(kv.end(), value.begin(), value.end());
    ++n_kv;
    return *this;
  }
  template <class T> GgufBuilder& scalar(const std::string& key, uint32_t type, T v) {
    Bytes b;
    put<T>(b, v);
    return raw(key, type, b);
  }
  GgufBuilder& u32(const std::string& key, uint32_t v) { return scalar(key, U32, v); }
  GgufBuilder& f32(const std::string& key, float v) { return scalar(key, F32, v); }
  GgufBuilder& str(const std::string& key, const std::string& v) {
    Bytes b;
    put_str(b, v);
    return raw(key, STRING, b);
  }
  GgufBuilder& str_array(const std::string& key, const std::vector<std::string>& v) {
    Bytes b;
    put<uint32_t>(b, STRING);
    put<uint64_t>(b, v.size());
    for (const auto& s : v) put_str(b, s);
    return raw(key, ARRAY, b);
  }
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, size_t nbytes,
                      std::optional<uint64_t> offset = std::nullopt, uint8_t fill = 0) {
    tensors.push_back({name, std::move(ne), type, nbytes, offset, fill});
    return *this;
  }

  Bytes build() const {
    Bytes b;
    put<uint32_t>(b, 0x46554747u);  // "GGUF"
    put<uint32_t>(b, version);
    put<uint64_t>(b, tensor_count.value_or(tensors.size()));
    put<uint64_t>(b, kv_count.value_or(n_kv));
    b.insert(b.end(), kv.begin(), kv.end());
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TensorSpec& t : tensors) {
      uint64_t off = t.offset.value_or(next);
      offsets.push_back(off);
      next = std::max(next, (off + t.nbytes + alignment - 1) / alignment * alignment);
      put_str(b, t.name);
      put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) put<uint64_t>(b, d);
      put<uint32_t>(b, t.type);
      put<uint64_t>(b, off);
    }
    while (b.size() % alignment) b.push_back(0);
    size_t data_start = b.size();
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (offsets[i] + tensors[i].nbytes > (1u << 24)) continue;  // deliberately bogus offsets: nothing to write
      size_t end = data_start + offsets[i] + tensors[i].nbytes;
      if (b.size() < end) b.resize(end, 0);
      std::memset(b.data() + data_start + offsets[i], tensors[i].fill, tensors[i].nbytes);
    }
    b.resize(b.size() + trailing_bytes, 0);
    return b;
  }
};

}  // namespace corvid::testing
