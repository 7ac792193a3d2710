#include "corvid/formats/ctranslate2.h"

#include <cstring>
#include <optional>
#include <set>

#include "corvid/core/error.h"
#include "corvid/core/mapped_file.h"
#include "corvid/formats/printable.h"

namespace corvid {
namespace {

// CTranslate2's DataType ids and their element sizes.
struct Ct2Type {
  int bytes;
  std::optional<DType> dtype;
};
std::optional<Ct2Type> ct2_type(int id) {
  switch (id) {
    case 0: return Ct2Type{4, DType::F32};
    case 1: return Ct2Type{1, std::nullopt};  // int8
    case 2: return Ct2Type{2, std::nullopt};  // int16
    case 3: return Ct2Type{4, DType::I32};
    case 4: return Ct2Type{2, DType::F16};
    case 5: return Ct2Type{2, DType::BF16};
    default: return std::nullopt;
  }
}

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}
  template <class T> T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const uint16_t n = get<uint16_t>(what);
    CORVID_CHECK(n >= 1, name_, ": ", what, " has length 0 (a string holds at least its NUL)");
    need(n, what);
    const char* p = reinterpret_cast<const char*>(bytes_.data() + pos_);
    CORVID_CHECK(p[n - 1] == '\0', name_, ": ", what, " is not NUL-terminated");
    pos_ += n;
    return std::string(p, n - 1);
  }
  std::span<const uint8_t> take(size_t n, const char* what) {
    need(n, what);
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  void need(size_t n, const char* what) const {
    if (bytes_.size() - pos_ < n) fail(name_, ": truncated (", what, " at byte ", pos_, ")");
  }
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

constexpr size_t kAlign = 64;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::shared_ptr<Ct2File> Ct2File::open(const std::string& path) {
  auto file = MappedFile::open(path);
  auto out = parse(std::span<const uint8_t>(file->data(), file->size()), path);
  return out;  // every tensor was copied out of the mapping
}

std::shared_ptr<Ct2File> Ct2File::parse(std::span<const uint8_t> bytes, const std::string& name) {
  std::shared_ptr<Ct2File> f(new Ct2File());
  f->path_ = name;
  Reader r(bytes, name);
  f->version_ = r.get<uint32_t>("binary version");
  CORVID_CHECK(f->version_ >= 4 && f->version_ <= kMaxVersion, name, ": CTranslate2 binary version ", f->version_,
               " is not supported (4 to ", kMaxVersion, ")");
  f->spec_ = r.str("spec name");
  r.get<uint32_t>("spec revision");
  const uint32_t count = r.get<uint32_t>("variable count");
  struct Pending {
    Ct2Variable var;
    std::span<const uint8_t> bytes;
  };
  std::vector<Pending> pending;
  std::set<std::string> names;  // variables_ is filled only once every variable has been read
  size_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    Pending p;
    p.var.name = r.str("variable name");
    const std::string pname = printable(p.var.name);
    const uint8_t rank = r.get<uint8_t>("rank");
    CORVID_CHECK(rank <= Tensor::kMaxDims, name, ": variable ", pname, " has rank ", int{rank}, " (at most ",
                 Tensor::kMaxDims, ")");
    uint64_t elements = 1;
    for (uint8_t d = 0; d < rank; ++d) {
      const uint32_t dim = r.get<uint32_t>("dimension");
      p.var.shape.push_back(dim);
      // Checked before multiplying: 2^40 elements times a 32-bit dimension can wrap.
      CORVID_CHECK(dim == 0 || elements <= (uint64_t{1} << 40) / dim, name, ": variable ", pname, " is too large");
      elements *= dim;
    }
    p.var.dtype_id = r.get<uint8_t>("dtype");
    const auto type = ct2_type(p.var.dtype_id);
    CORVID_CHECK(type, name, ": variable ", pname, " has unknown dtype ", p.var.dtype_id);
    const uint32_t nbytes = r.get<uint32_t>("byte count");
    CORVID_CHECK(nbytes == elements * static_cast<uint64_t>(type->bytes), name, ": variable ", pname, " holds ",
                 nbytes, " bytes, its shape needs ", elements * static_cast<uint64_t>(type->bytes));
    p.bytes = r.take(nbytes, "variable data");
    CORVID_CHECK(names.insert(p.var.name).second, name, ": variable ", pname, " appears twice");
    total += aligned(nbytes);
    pending.push_back(std::move(p));
  }
  if (f->version_ >= 3) {
    const uint32_t n_aliases = r.get<uint32_t>("alias count");
    for (uint32_t i = 0; i < n_aliases; ++i) {
      std::string alias = r.str("alias"), target = r.str("alias target");
      f->aliases_[alias] = target;
    }
  }
  CORVID_CHECK(r.done(), name, ": ", bytes.size() - r.pos(), " bytes after the last variable");
  f->data_ = Buffer(total);
  size_t at = 0;
  for (Pending& p : pending) {
    auto* dst = static_cast<uint8_t*>(f->data_.data()) + at;
    if (!p.bytes.empty()) std::memcpy(dst, p.bytes.data(), p.bytes.size());
    at += aligned(p.bytes.size());
    Tensor& v = p.var.view;
    const auto type = ct2_type(p.var.dtype_id);
    v.dtype = type->dtype.value_or(DType::I32);  // i8 / i16 have no DType: read through scalar()
    v.ndim = static_cast<int>(p.var.shape.size());
    for (int d = 0; d < v.ndim; ++d) v.shape[static_cast<size_t>(d)] = p.var.shape[static_cast<size_t>(d)];
    v.data = dst;
    const std::string key = p.var.name;
    f->variables_.emplace(key, std::move(p.var));
  }
  for (const auto& [alias, target] : f->aliases_)
    CORVID_CHECK(f->variables_.count(target), name, ": alias ", printable(alias), " names a missing variable ",
                 printable(target));
  return f;
}

const Ct2Variable* Ct2File::find(const std::string& name) const {
  auto it = variables_.find(name);
  if (it != variables_.end()) return &it->second;
  auto a = aliases_.find(name);
  if (a == aliases_.end()) return nullptr;
  return &variables_.at(a->second);
}

int64_t Ct2File::scalar(const std::string& name) const {
  const Ct2Variable* v = find(name);
  CORVID_CHECK(v, path_, ": missing variable ", name);
  CORVID_CHECK(v->shape.empty(), path_, ": variable ", name, " is not a scalar");
  const auto* p = static_cast<const uint8_t*>(v->view.data);
  switch (v->dtype_id) {
    case 1: return static_cast<int8_t>(p[0]);
    case 2: {
      int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case 3: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    default: fail(path_, ": variable ", name, " is not an integer scalar");
  }
}

}  // namespace corvid
