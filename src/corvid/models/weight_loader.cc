#include "corvid/models/weight_loader.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/buffer.h"
#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/ops.h"

namespace corvid {

namespace {

constexpr size_t kAlign = 256;  // cudaMalloc's own alignment; keeps 16-byte vector loads legal

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool same_shape(const Tensor& t, const std::vector<int64_t>& shape) {
  if (t.ndim != static_cast<int>(shape.size())) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (t.shape[i] != shape[i]) return false;
  return true;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// splitmix64: counter-based, so rows fill in parallel and values do not depend on the thread count.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1).
float unit(uint64_t stream, uint64_t i) {
  return static_cast<float>(static_cast<double>(mix(stream ^ mix(i)) >> 11) * 0x1.0p-52 - 1.0);
}

// CORVID_NO_FUSION=1 turns the fused decode GEMVs off, for A/B benchmarks (read once).
bool fusion_enabled() {
  static const bool on = !env_flag("CORVID_NO_FUSION");
  return on;
}

}  // namespace

void upload_tensor(const Tensor& src, void* dst, Device device, DeviceBuffer& staging, size_t staging_limit) {
  CORVID_CHECK(src.device == Device::CPU, "upload: the tensor is not in host memory");
  Tensor d = src;
  d.device = device;
  d.data = dst;
  d.dtype = ops::device_weight_dtype(src, device);
  if (d.dtype == src.dtype) {
    copy_tensor(d, src);
    return;
  }
  // Rows are independent in the row layouts: rearrange a chunk of rows at a time, so
  // that loading needs little more device memory than the weights (an 8B model's Q8_0
  // output matrix is 558 MB).
  const int64_t chunk =
      std::max<int64_t>(1, std::min<int64_t>(src.rows(), static_cast<int64_t>(staging_limit / src.row_bytes())));
  const size_t need = static_cast<size_t>(chunk) * src.row_bytes();
  if (staging.size() < need || staging.device() != device) staging = DeviceBuffer(device, need);
  const int64_t cols = src.cols();
  for (int64_t r0 = 0; r0 < src.rows(); r0 += chunk) {
    const int64_t rows = std::min(chunk, src.rows() - r0);
    const size_t at = static_cast<size_t>(r0) * src.row_bytes();
    const Tensor part(src.dtype, {rows, cols}, static_cast<char*>(src.data) + at, Device::CPU);
    const Tensor raw(src.dtype, {rows, cols}, staging.data(), device);
    const Tensor out(d.dtype, {rows, cols}, static_cast<char*>(d.data) + at, device);
    copy_tensor(raw, part);
    ops::rearrange_weight(raw, out);  // ordered before the next chunk's copy (one stream)
  }
}

namespace {

void check_placement(const WeightPlacement& p) {
  CORVID_CHECK(p.moe_offload_layers >= WeightPlacement::kAllMoeLayers, "--moe-offload ", p.moe_offload_layers,
               ": expected a number of layers or 'all'");
  CORVID_CHECK(p.moe_offload_layers == 0 || p.device != Device::CPU,
               "--moe-offload needs a GPU (--device cuda): on the CPU every expert is in host memory already");
}

}  // namespace

WeightLoader::WeightLoader(const WeightSet& files, const WeightPlacement& placement)
    : files_(&files), source_(files.source), device_(placement.device), placement_(placement),
      fuse_(fusion_enabled()) {
  check_placement(placement);
}

WeightLoader::WeightLoader(std::string source, DType dtype, uint64_t seed, const WeightPlacement& placement)
    : source_(std::move(source)), device_(placement.device), placement_(placement), dummy_dtype_(dtype), seed_(seed),
      fuse_(fusion_enabled()) {
  check_placement(placement);
}

Residency WeightLoader::expert_residency(int sparse_layer) const {
  return device_ != Device::CPU && placement_.offloads(sparse_layer) ? Residency::HostMapped : Residency::Device;
}

std::shared_ptr<DeviceBuffer> WeightLoader::allocate(size_t bytes, Residency where) {
  auto buffer = std::make_shared<DeviceBuffer>(device_, aligned(bytes), where);
  if (where == Residency::HostMapped) storage_.host_mapped_bytes += static_cast<int64_t>(buffer->size());
  return buffer;
}

bool WeightLoader::has(const std::string& name) const { return files_ && files_->has(name); }

const Tensor& WeightLoader::make_dummy(const std::string& name, const std::vector<int64_t>& shape, WeightRole role) {
  const DType dt = role == WeightRole::Norm || role == WeightRole::Bias ? DType::F32 : dummy_dtype_;
  const int64_t cols = shape.back(), rows = numel(shape) / cols;
  CORVID_CHECK(cols % dtype_info(dt).block_elems == 0, source_, ": tensor ", name, " has rows of ", cols,
               " elements, not a whole number of ", dtype_name(dt), " blocks (", dtype_info(dt).block_elems, ")");
  float center = 0.0f, spread = 0.02f;
  if (role == WeightRole::Embedding) spread = 0.02f * std::sqrt(3.0f);
  if (role == WeightRole::Projection) spread = std::sqrt(3.0f / static_cast<float>(cols));
  if (role == WeightRole::Norm) center = 1.0f, spread = 0.05f;
  auto storage = std::make_shared<Buffer>(bytes_for(dt, rows * cols));
  Tensor t(dt, {rows, cols}, storage->data());
  if (shape.size() == 1) t = Tensor(dt, {cols}, storage->data());
  const uint64_t stream = mix(seed_ * 0x100000001b3ull + ++next_stream_);
  // Checked above, on the caller's thread: an exception inside the pool's workers cannot be caught.
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        row[static_cast<size_t>(c)] = center + spread * unit(stream, static_cast<uint64_t>(r * cols + c));
      ops::quantize_row(dt, row.data(), static_cast<char*>(storage->data()) + r * t.row_bytes(), cols);
    }
  }, 16);
  storage_.owners.push_back(storage);
  made_.emplace_back(name, t);
  return made_.back().second;
}

const Tensor& WeightLoader::host(const std::string& name, const std::vector<int64_t>& shape, WeightRole role) {
  CORVID_CHECK(std::find(used_.begin(), used_.end(), name) == used_.end(), source_, ": tensor ", name,
               " asked for twice (a family's inventory names each weight once)");
  used_.push_back(name);
  storage_.parameters += numel(shape);
  if (!files_) return make_dummy(name, shape, role);
  auto it = files_->tensors.find(name);
  if (it == files_->tensors.end()) fail(source_, ": missing tensor ", name);
  if (!same_shape(it->second, shape))
    fail(source_, ": tensor ", name, " has shape ", it->second.shape_str(), ", the config implies ", shape_str(shape));
  return it->second;
}

Tensor WeightLoader::place(const Tensor& t, Residency where) {
  if (device_ == Device::CPU) return t;
  auto buffer = allocate(t.nbytes(), where);
  Tensor d = t;
  d.device = device_;
  d.data = buffer->data();
  d.dtype = ops::device_weight_dtype(t, device_);
  upload_tensor(t, d.data, device_, staging_);
  storage_.owners.push_back(std::move(buffer));
  return d;
}

Tensor WeightLoader::get(const std::string& name, std::vector<int64_t> shape, WeightRole role) {
  return place(host(name, shape, role));
}

Tensor WeightLoader::optional(const std::string& name, std::vector<int64_t> shape, WeightRole role,
                              bool dummy_present) {
  if (files_ ? !files_->has(name) : !dummy_present) return Tensor();
  return get(name, std::move(shape), role);
}

Tensor WeightLoader::norm(const std::string& name, int64_t size, bool plus_one) {
  const Tensor& t = host(name, {size}, WeightRole::Norm);
  if (dummy()) plus_one = false;  // made-up norms are already centred on 1
  if (!plus_one && (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16)) return place(t);
  // Shifted, or a dtype the norms do not read: an F32 copy.
  auto storage = std::make_shared<Buffer>(static_cast<size_t>(size) * sizeof(float));
  Tensor f(DType::F32, {size}, storage->data());
  ops::dequantize_row(t.dtype, t.data, f.ptr<float>(), size);
  if (plus_one)
    for (int64_t i = 0; i < size; ++i) f.ptr<float>()[i] += 1.0f;
  storage_.owners.push_back(storage);
  return place(f);
}

Tensor WeightLoader::ones(int64_t size) {
  auto storage = std::make_shared<Buffer>(static_cast<size_t>(size) * sizeof(float));
  Tensor f(DType::F32, {size}, storage->data());
  std::fill_n(f.ptr<float>(), size, 1.0f);
  storage_.owners.push_back(storage);
  return place(f);
}

WeightLoader::Fused WeightLoader::fused(const std::vector<Part>& parts) {
  return fused_parts(parts, fuse_, Residency::Device);
}

WeightLoader::Fused WeightLoader::stacked(const std::vector<Part>& parts, Residency where) {
  return fused_parts(parts, true, where);
}

Tensor WeightLoader::get_stack(const std::string& name, int64_t experts, int64_t rows, int64_t cols,
                               Residency where) {
  const Tensor& t = host(name, {experts, rows, cols}, WeightRole::Projection);
  return place(Tensor(t.dtype, {experts * rows, cols}, t.data, t.device), where);
}

WeightLoader::Fused WeightLoader::fused_parts(const std::vector<Part>& parts, bool fuse, Residency where) {
  CORVID_CHECK(!parts.empty(), source_, ": an empty fused weight");
  std::vector<const Tensor*> hosts;
  for (const Part& p : parts) {
    CORVID_CHECK(p.shape.size() == 2, source_, ": fused weight ", p.name, " must be 2-D");
    hosts.push_back(&host(p.name, p.shape, WeightRole::Projection));
  }
  Fused out;
  int64_t rows = 0;
  bool uniform = true;
  for (const Tensor* h : hosts) {
    uniform &= h->dtype == hosts[0]->dtype && h->cols() == hosts[0]->cols();
    rows += h->rows();
  }
  if (device_ == Device::CPU) {
    const char* expected = static_cast<const char*>(hosts[0]->data);
    bool adjacent = uniform;
    for (const Tensor* h : hosts) {
      out.parts.push_back(*h);
      adjacent &= h->data == expected;
      expected += h->nbytes();
    }
    if (adjacent && fuse) out.whole = Tensor(hosts[0]->dtype, {rows, hosts[0]->cols()}, hosts[0]->data, Device::CPU);
    return out;
  }
  if (!uniform || !fuse) {
    for (const Tensor* h : hosts) out.parts.push_back(place(*h, where));
    return out;
  }
  // One allocation, parts back to back (row layouts rearrange rows independently, so
  // the parts' layouts side by side are the whole's).
  size_t bytes = 0;
  for (const Tensor* h : hosts) bytes += h->nbytes();
  auto buffer = allocate(bytes, where);
  char* at = static_cast<char*>(buffer->data());
  for (const Tensor* h : hosts) {
    Tensor d = *h;
    d.device = device_;
    d.data = at;
    d.dtype = ops::device_weight_dtype(*h, device_);
    upload_tensor(*h, at, device_, staging_);
    out.parts.push_back(d);
    at += h->nbytes();
  }
  out.whole = Tensor(out.parts[0].dtype, {rows, hosts[0]->cols()}, buffer->data(), device_);
  storage_.owners.push_back(std::move(buffer));
  return out;
}

Tensor WeightLoader::device_scratch(int64_t bytes) {
  if (device_ == Device::CPU || bytes <= 0) return Tensor();
  const int64_t words = (bytes + 3) / 4;
  auto buffer = allocate(static_cast<size_t>(words) * 4, Residency::Device);
  Tensor t(DType::I32, {words}, buffer->data(), device_);
  storage_.owners.push_back(std::move(buffer));
  return t;
}

std::vector<float> WeightLoader::read_f32(const std::string& name, int64_t count) {
  const Tensor& t = host(name, {count}, WeightRole::Norm);
  std::vector<float> out(static_cast<size_t>(count));
  ops::dequantize_row(t.dtype, t.data, out.data(), count);
  storage_.parameters -= count;  // a load-time constant, not a model parameter
  return out;
}

void WeightLoader::ignore(const std::string& name) {
  if (files_ && files_->has(name)) used_.push_back(name);
}

WeightStorage WeightLoader::finish() {
  if (files_) {
    std::vector<std::string> used = used_;
    std::sort(used.begin(), used.end());
    for (const auto& [name, t] : files_->tensors)
      if (!std::binary_search(used.begin(), used.end(), name))
        fail(source_, ": tensor ", name, " is not used by the model (a config that disagrees with the weights?)");
  }
  synchronize(device_);  // the uploads read the mapped files; finish before anyone unmaps them
  return std::move(storage_);
}

}  // namespace corvid
