// GGUF reader. The file layout (little-endian throughout):
//   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count × (string key | u32 value_type | value)
//   tensor_count × (string name | u32 n_dims | n_dims × u64 ne | u32 ggml_type | u64 offset)
//   padding to `general.alignment` | data section (tensor offsets are relative to it)
// A string is u64 length + bytes (no terminator). Every length and count is checked
// against the bytes that remain before anything is allocated or read, so a hostile
// file fails with a corvid::Error instead of a crash or a huge allocation.
#include "corvid/formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "corvid/core/error.h"
#include "corvid/formats/printable.h"

namespace corvid {
namespace {

// GGUF metadata value types.
enum : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
  kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Bytes the smallest encoding of a value of `type` takes; arrays and strings
// at least carry their 8-byte length. Used to bound counts by the bytes left.
size_t min_value_size(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: case kString: return 8;
    case kArray: return 12;
    default: return 0;
  }
}

// ggml type ids of the tensor types corvid uses in place (ggml.h enum ggml_type).
std::optional<DType> dtype_from_ggml(uint32_t id) {
  switch (id) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 6: return DType::Q5_0;
    case 7: return DType::Q5_1;
    case 8: return DType::Q8_0;
    case 12: return DType::Q4_K;
    case 13: return DType::Q5_K;
    case 14: return DType::Q6_K;
    case 30: return DType::BF16;
    default: return std::nullopt;
  }
}

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;                 // nested arrays deeper than this are not real metadata
// Bounds memory (a value costs ~48 bytes in memory, as little as 1 in the file):
// real metadata holds ~1e6 values (vocabulary tokens, scores, merges).
constexpr uint64_t kMaxMetadataValues = 1ull << 24;

// Bounds-checked little-endian cursor over the image.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  void need(size_t n, const char* what) const {
    if (n > left())
      fail(name_, ": truncated file: ", what, " at byte ", pos_, " needs ", n, " bytes, ", left(), " left");
  }
  template <class T> T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // unaligned-safe; host is little-endian (x86-64, aarch64)
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > left())
      fail(name_, ": ", what, " at byte ", pos_ - 8, " has length ", len, " past the end of the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

class Parser {
 public:
  Parser(Reader& r, const std::string& name) : r_(r), name_(name) {}

  GgufValue value(uint32_t type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    if (++values_ > kMaxMetadataValues)
      fail(name_, ": metadata ", printable(key), ": more than ", kMaxMetadataValues, " values");
    switch (type) {
      case kU8: v.value = uint64_t{r_.read<uint8_t>("metadata value")}; break;
      case kU16: v.value = uint64_t{r_.read<uint16_t>("metadata value")}; break;
      case kU32: v.value = uint64_t{r_.read<uint32_t>("metadata value")}; break;
      case kU64: v.value = r_.read<uint64_t>("metadata value"); break;
      case kI8: v.value = int64_t{r_.read<int8_t>("metadata value")}; break;
      case kI16: v.value = int64_t{r_.read<int16_t>("metadata value")}; break;
      case kI32: v.value = int64_t{r_.read<int32_t>("metadata value")}; break;
      case kI64: v.value = r_.read<int64_t>("metadata value"); break;
      case kF32: v.value = double{r_.read<float>("metadata value")}; break;
      case kF64: v.value = r_.read<double>("metadata value"); break;
      case kBool: {
        uint8_t b = r_.read<uint8_t>("metadata value");
        if (b > 1) fail(name_, ": metadata ", printable(key), ": bool value ", int{b}, " is not 0 or 1");
        v.value = b == 1;
        break;
      }
      case kString: v.value = r_.read_string("metadata string"); break;
      case kArray: v.value = array(key, depth); break;
      default: fail(name_, ": metadata ", printable(key), ": unknown value type ", type);
    }
    return v;
  }

 private:
  GgufArray array(const std::string& key, int depth) {
    if (depth >= kMaxArrayDepth)
      fail(name_, ": metadata ", printable(key), ": arrays nested deeper than ", kMaxArrayDepth);
    uint32_t elem_type = r_.read<uint32_t>("array type");
    uint64_t count = r_.read<uint64_t>("array length");
    size_t min = min_value_size(elem_type);
    if (min == 0) fail(name_, ": metadata ", printable(key), ": unknown array element type ", elem_type);
    if (count > r_.left() / min)
      fail(name_, ": metadata ", printable(key), ": array of ", count, " elements cannot fit in the ", r_.left(),
           " bytes left");
    GgufArray out;
    out.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) out.push_back(value(elem_type, key, depth + 1));
    return out;
  }

  Reader& r_;
  const std::string& name_;
  uint64_t values_ = 0;
};

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

const char* type_name(uint32_t t) {
  static const char* kNames[] = {"uint8", "int8",  "uint16", "int16",  "uint32", "int32", "float32",
                                 "bool",  "string", "array", "uint64", "int64",  "float64"};
  return t < 13 ? kNames[t] : "unknown";
}

}  // namespace

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse(file, file->data(), file->size(), path);
}

std::shared_ptr<GgufFile> GgufFile::parse(std::shared_ptr<const void> owner, const uint8_t* data, size_t size,
                                          const std::string& name) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->owner_ = std::move(owner);
  Reader r(data, size, name);

  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) fail(name, ": not a GGUF file (bad magic)");
  r.read<uint32_t>("magic");
  f->version_ = r.read<uint32_t>("version");
  // v1 used 32-bit counts; v2 and v3 share this layout (v3 only added big-endian files,
  // which show up here as an absurd version number).
  if (f->version_ != 2 && f->version_ != 3) fail(name, ": unsupported GGUF version ", f->version_, " (need 2 or 3)");
  uint64_t n_tensors = r.read<uint64_t>("tensor count");
  uint64_t n_kv = r.read<uint64_t>("metadata count");
  // Each key-value takes at least 13 bytes (key length, type, 1-byte value); each
  // tensor info at least 32 (name length, n_dims, one dim, type, offset).
  if (n_kv > r.left() / 13) fail(name, ": metadata count ", n_kv, " cannot fit in the file");
  if (n_tensors > r.left() / 32) fail(name, ": tensor count ", n_tensors, " cannot fit in the file");

  Parser p(r, name);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key");
    uint32_t type = r.read<uint32_t>("metadata type");
    GgufValue v = p.value(type, key, 0);
    if (!f->metadata_.emplace(key, std::move(v)).second) fail(name, ": duplicate metadata key ", printable(key));
  }

  if (const GgufValue* a = f->find("general.alignment")) {
    const uint64_t* u = std::get_if<uint64_t>(&a->value);
    const int64_t* s = std::get_if<int64_t>(&a->value);
    uint64_t al = u ? *u : s && *s > 0 ? static_cast<uint64_t>(*s) : 0;
    if (!u && !s) fail(name, ": general.alignment is a ", type_name(a->type), ", not an integer");
    if (!is_pow2(al) || al > (1u << 30))
      fail(name, ": general.alignment ", al, " is not a power of two up to 2^30");
    f->alignment_ = static_cast<size_t>(al);
  }

  f->tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.read_string("tensor name");
    uint32_t n_dims = r.read<uint32_t>("tensor dims");
    if (n_dims < 1 || n_dims > kMaxDims)
      fail(name, ": tensor ", printable(t.name), ": ", n_dims, " dimensions (need 1 to ", kMaxDims, ")");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = r.read<uint64_t>("tensor dim");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(name, ": tensor ", printable(t.name), ": dimension ", d, " is ", static_cast<int64_t>(ne),
             " (must be positive)");
      if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
        fail(name, ": tensor ", printable(t.name), ": element count overflows");
      numel *= ne;
      t.shape.insert(t.shape.begin(), static_cast<int64_t>(ne));  // ne[0] is innermost; shape is outermost-first
    }
    uint32_t type_id = r.read<uint32_t>("tensor type");
    std::optional<DType> dt = dtype_from_ggml(type_id);
    if (!dt) fail(name, ": tensor ", printable(t.name), ": unsupported ggml type id ", type_id);
    t.dtype = *dt;
    const DTypeInfo& info = dtype_info(t.dtype);
    if (t.shape.back() % info.block_elems != 0)
      fail(name, ": tensor ", printable(t.name), ": row of ", t.shape.back(), " elements is not a whole number of ",
           info.block_elems, "-element ", info.name, " blocks");
    t.offset = r.read<uint64_t>("tensor offset");
    if (!f->tensor_index_.emplace(t.name, f->tensors_.size()).second)
      fail(name, ": duplicate tensor name ", printable(t.name));
    f->tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  size_t header_end = r.pos();
  size_t data_start = header_end + (f->alignment_ - header_end % f->alignment_) % f->alignment_;
  if (!f->tensors_.empty() && data_start > size)
    fail(name, ": data section starts at byte ", data_start, " past the end of the file (", size, " bytes)");
  size_t data_size = size - std::min(data_start, size);

  // Bounds, alignment and overlap of every tensor's bytes.
  std::vector<std::pair<uint64_t, size_t>> ranges;  // (offset, tensor index)
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    GgufTensorInfo& t = f->tensors_[i];
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    const DTypeInfo& info = dtype_info(t.dtype);
    uint64_t blocks = numel / static_cast<uint64_t>(info.block_elems);
    if (blocks > data_size / static_cast<uint64_t>(info.block_bytes))
      fail(name, ": tensor ", printable(t.name), ": ", numel, " ", info.name, " elements do not fit in the ", data_size,
           "-byte data section");
    uint64_t nbytes = blocks * static_cast<uint64_t>(info.block_bytes);
    if (t.offset % f->alignment_ != 0)
      fail(name, ": tensor ", printable(t.name), ": offset ", t.offset, " is not a multiple of the alignment ",
           f->alignment_);
    if (t.offset > data_size || nbytes > data_size - t.offset)
      fail(name, ": tensor ", printable(t.name), ": data [", t.offset, ", +", nbytes,
           ") runs past the end of the file");
    t.view.dtype = t.dtype;
    t.view.ndim = static_cast<int>(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) t.view.shape[d] = t.shape[d];
    // Kernels read F32 through float* and blocks through their 2-byte scales; with a
    // file alignment below that, a view could be misaligned (undefined behaviour).
    const uint8_t* bytes = data + data_start + t.offset;
    size_t natural = t.dtype == DType::F32 ? 4 : 2;
    if (reinterpret_cast<uintptr_t>(bytes) % natural != 0)
      fail(name, ": tensor ", printable(t.name), ": data is not ", natural, "-byte aligned");
    // Views are read-only in practice (the mapping is PROT_READ); Tensor has no const flavour.
    t.view.data = const_cast<uint8_t*>(bytes);
    ranges.emplace_back(t.offset, i);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) {
    const GgufTensorInfo& prev = f->tensors_[ranges[k - 1].second];
    const GgufTensorInfo& cur = f->tensors_[ranges[k].second];
    if (prev.offset + prev.view.nbytes() > cur.offset)
      fail(name, ": tensors ", printable(prev.name), " and ", printable(cur.name), " overlap in the data section");
  }
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  fail(path, ": metadata ", printable(key), " is a ", type_name(v.type), ", expected ", want);
}

std::optional<int64_t> as_int(const GgufValue& v) {
  if (auto* s = std::get_if<int64_t>(&v.value)) return *s;
  if (auto* u = std::get_if<uint64_t>(&v.value))
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::optional<double> as_float(const GgufValue& v) {
  if (auto* d = std::get_if<double>(&v.value)) return *d;
  if (auto* s = std::get_if<int64_t>(&v.value)) return static_cast<double>(*s);
  if (auto* u = std::get_if<uint64_t>(&v.value)) return static_cast<double>(*u);
  return std::nullopt;
}

}  // namespace

// Typed getters ------------------------------------------------------------

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto* s = std::get_if<std::string>(&v->value);
  if (!s) wrong_type(path_, key, *v, "a string");
  return *s;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto i = as_int(*v);
  if (!i) wrong_type(path_, key, *v, "an integer that fits int64");
  return *i;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto d = as_float(*v);
  if (!d) wrong_type(path_, key, *v, "a number");
  return *d;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto* b = std::get_if<bool>(&v->value);
  if (!b) wrong_type(path_, key, *v, "a bool");
  return *b;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto* a = std::get_if<GgufArray>(&v->value);
  if (!a) wrong_type(path_, key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(a->size());
  for (const GgufValue& e : *a) {
    auto* s = std::get_if<std::string>(&e.value);
    if (!s) fail(path_, ": metadata ", printable(key), " holds a ", type_name(e.type), ", expected strings");
    out.push_back(*s);
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto* a = std::get_if<GgufArray>(&v->value);
  if (!a) wrong_type(path_, key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(a->size());
  for (const GgufValue& e : *a) {
    auto i = as_int(e);
    if (!i) fail(path_, ": metadata ", printable(key), " holds a ", type_name(e.type), ", expected integers");
    out.push_back(*i);
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata ", key);
  auto* a = std::get_if<GgufArray>(&v->value);
  if (!a) wrong_type(path_, key, *v, "an array of numbers");
  std::vector<double> out;
  out.reserve(a->size());
  for (const GgufValue& e : *a) {
    auto d = as_float(e);
    if (!d) fail(path_, ": metadata ", printable(key), " holds a ", type_name(e.type), ", expected numbers");
    out.push_back(*d);
  }
  return out;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

}  // namespace corvid
