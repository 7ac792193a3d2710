#include "corvid/formats/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "corvid/core/error.h"
#include "corvid/core/mapped_file.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/printable.h"

namespace corvid {
namespace {

using json = nlohmann::json;

struct DtypeSpec {
  const char* name;
  int bytes;
  std::optional<DType> dtype;
};

// Every dtype the safetensors format defines (its Rust `Dtype` enum, byte-sized ones);
// only some have a corvid DType, the rest parse but cannot be used as weights.
const DtypeSpec* find_dtype(const std::string& name) {
  static const DtypeSpec kSpecs[] = {
      {"F32", 4, DType::F32},  {"F16", 2, DType::F16},   {"BF16", 2, DType::BF16}, {"I32", 4, DType::I32},
      {"F64", 8, std::nullopt}, {"I64", 8, std::nullopt}, {"U64", 8, std::nullopt}, {"U32", 4, std::nullopt},
      {"I16", 2, std::nullopt}, {"U16", 2, std::nullopt}, {"I8", 1, std::nullopt},  {"U8", 1, std::nullopt},
      {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
  };
  for (const DtypeSpec& s : kSpecs)
    if (name == s.name) return &s;
  return nullptr;
}

uint64_t to_u64(const json& v, const std::string& file, const std::string& tensor, const char* what) {
  if (!v.is_number_unsigned())  // nlohmann parses non-negative integers as unsigned
    fail(file, ": tensor ", printable(tensor), ": ", what, " must be non-negative integers");
  return v.get<uint64_t>();
}

SafetensorsTensor parse_entry(const std::string& file, const std::string& name, const json& e,
                              uint64_t data_size) {
  SafetensorsTensor t;
  t.name = name;
  const std::string pname = printable(name);
  if (!e.is_object()) fail(file, ": tensor ", pname, ": header entry is not an object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) fail(file, ": tensor ", pname, ": missing or non-string dtype");
  if (sh == e.end() || !sh->is_array()) fail(file, ": tensor ", pname, ": missing or non-array shape");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    fail(file, ": tensor ", pname, ": data_offsets must be [begin, end]");

  t.dtype_name = dt->get<std::string>();
  const DtypeSpec* spec = find_dtype(t.dtype_name);
  if (!spec) fail(file, ": tensor ", pname, ": unknown dtype ", printable(t.dtype_name));
  t.dtype = spec->dtype;

  if (sh->size() > static_cast<size_t>(Tensor::kMaxDims))
    fail(file, ": tensor ", pname, ": ", sh->size(), " dimensions (at most ", Tensor::kMaxDims, ")");
  uint64_t numel = 1;
  for (const json& d : *sh) {
    uint64_t n = to_u64(d, file, name, "shape entries");
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n))
      fail(file, ": tensor ", pname, ": element count overflows");
    numel *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  t.begin = to_u64((*off)[0], file, name, "data_offsets");
  t.end = to_u64((*off)[1], file, name, "data_offsets");
  if (t.begin > t.end || t.end > data_size)
    fail(file, ": tensor ", pname, ": data_offsets [", t.begin, ", ", t.end, "] outside the ", data_size,
         "-byte data section");
  const uint64_t elem = static_cast<uint64_t>(spec->bytes);
  if (numel > (t.end - t.begin) / elem || numel * elem != t.end - t.begin)
    fail(file, ": tensor ", pname, ": ", t.end - t.begin, " bytes do not match shape ", sh->dump(),
         " of ", t.dtype_name, " (", elem, " bytes each)");
  return t;
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse(file, file->data(), file->size(), path);
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::parse(std::shared_ptr<const void> owner, const uint8_t* data,
                                                        size_t size, const std::string& name) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = name;
  f->owner_ = std::move(owner);
  if (size < 8) fail(name, ": truncated file: ", size, " bytes, no header length");
  uint64_t n = 0;
  std::memcpy(&n, data, 8);  // little-endian host
  if (n > size - 8) fail(name, ": header length ", n, " runs past the end of the file (", size, " bytes)");
  if (n > kMaxHeaderBytes) fail(name, ": header length ", n, " exceeds the ", kMaxHeaderBytes, "-byte limit");
  const char* text = reinterpret_cast<const char*>(data + 8);

  json header;
  try {
    header = json::parse(text, text + n);
  } catch (const json::exception& e) {
    fail(name, ": bad JSON header: ", printable(e.what(), 200));
  }
  if (!header.is_object()) fail(name, ": JSON header is not an object");

  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(name, ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(name, ": __metadata__ value of ", printable(m.key()), " is not a string");
        f->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    SafetensorsTensor t = parse_entry(name, it.key(), *it, data_size);
    const uint8_t* p = base + t.begin;
    if (t.dtype) {
      // Kernels read these through typed pointers, where a misaligned one would be
      // undefined behaviour: such a tensor (an unpadded header shifts them all) is read
      // from an aligned copy (Buffer: 64-byte aligned).
      const size_t align = dtype_info(*t.dtype).block_bytes;
      if (reinterpret_cast<uintptr_t>(p) % align != 0 && t.end > t.begin) {
        Buffer copy(t.end - t.begin);
        std::memcpy(copy.data(), p, t.end - t.begin);
        p = static_cast<const uint8_t*>(copy.data());
        f->copies_.push_back(std::move(copy));
        f->copied_bytes_ += t.end - t.begin;
      }
      t.view.dtype = *t.dtype;
    } else {
      t.view.dtype = DType::F32;  // placeholder: the view is not usable as a typed tensor
    }
    t.view.ndim = static_cast<int>(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) t.view.shape[d] = t.shape[d];
    t.view.data = const_cast<uint8_t*>(p);  // the mapping is read-only; Tensor has no const flavour
    f->tensors_.push_back(std::move(t));
  }

  // Sort by position: the data order is what the overlap check and readers of
  // the whole file want. (JSON object order is alphabetical in nlohmann.)
  std::sort(f->tensors_.begin(), f->tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < f->tensors_.size(); ++i) {
    const SafetensorsTensor& a = f->tensors_[i - 1];
    const SafetensorsTensor& b = f->tensors_[i];
    if (b.begin < a.end)
      fail(name, ": tensors ", printable(a.name), " and ", printable(b.name), " overlap in the data section");
  }
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  if (!f->copies_.empty())
    std::fprintf(stderr,
                 "corvid: %s: %zu tensors (%.1f MiB) are not aligned to their element size in the file (a header "
                 "without padding); copied them once into aligned memory\n",
                 printable(name).c_str(), f->copies_.size(), static_cast<double>(f->copied_bytes_) / (1 << 20));
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

namespace fs = std::filesystem;

bool is_file(const std::string& path) {
  std::error_code ec;  // a path we cannot stat is reported as missing, not thrown
  return fs::is_regular_file(path, ec);
}

void add_tensor(WeightSet& w, const SafetensorsFile& f, const SafetensorsTensor& t) {
  // Older transformers saved BERT's position_ids buffer (0, 1, 2, ... in I64) beside the
  // weights. It is not a weight: models make their positions themselves.
  if (t.dtype_name == "I64" && t.name.ends_with("position_ids")) return;
  if (!t.dtype)
    fail(f.path(), ": tensor ", printable(t.name), " has dtype ", t.dtype_name,
         ", which corvid cannot use as a weight (F32, F16, BF16, I32)");
  if (!w.tensors.emplace(t.name, t.view).second)
    fail(f.path(), ": tensor ", printable(t.name), " also appears in another shard");
}

WeightSet load_sharded(const std::string& dir, const std::string& index_path) {
  json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(index_path, ": no weight_map object");
  const json& map = index["weight_map"];
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->is_string()) fail(index_path, ": weight_map entry ", printable(it.key()), " is not a string");
    std::string shard = it->get<std::string>();
    // Shards are files next to the index; anything else could read outside the folder.
    if (shard.empty() || shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos || shard == "." ||
        shard == "..")
      fail(index_path, ": shard name '", printable(shard), "' is not a file name in the checkpoint folder");
    if (!shards.count(shard)) {
      std::string path = dir + "/" + shard;
      if (!is_file(path)) fail(index_path, ": shard ", printable(shard), " does not exist");
      shards[shard] = SafetensorsFile::open(path);
    }
  }
  if (shards.empty()) fail(index_path, ": weight_map is empty");

  WeightSet w;
  w.source = dir;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const SafetensorsFile& shard = *shards[it->get<std::string>()];
    const SafetensorsTensor* t = shard.find(it.key());
    if (!t) fail(index_path, ": tensor ", printable(it.key()), " is not in shard ", printable(it->get<std::string>()));
    add_tensor(w, shard, *t);
  }
  // Tensors a shard holds beyond the index are loaded too (transformers reads whole
  // shards), but never twice.
  for (auto& [shard_name, shard] : shards) {
    for (const SafetensorsTensor& t : shard->tensors())
      if (!map.contains(t.name)) add_tensor(w, *shard, t);
    w.owners.push_back(shard);
  }
  return w;
}

}  // namespace

WeightSet load_safetensors_checkpoint(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string single = dir + "/model.safetensors";
  if (is_file(index)) return load_sharded(dir, index);
  if (!is_file(single)) fail(dir, ": no model.safetensors or model.safetensors.index.json");
  auto f = SafetensorsFile::open(single);
  WeightSet w;
  w.source = single;
  for (const SafetensorsTensor& t : f->tensors()) add_tensor(w, *f, t);
  w.owners.push_back(f);
  return w;
}

}  // namespace corvid
