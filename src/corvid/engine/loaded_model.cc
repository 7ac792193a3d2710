#include "corvid/engine/loaded_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "corvid/ops/ops.h"

namespace corvid {

namespace {

// Upload order: by name, except that q, k, v (and gate, up) of a layer come back to
// back, so the model can run each group as one matrix (LlamaModel's fused GEMVs).
std::string upload_key(const std::string& name) {
  static const std::pair<const char*, const char*> kGroups[] = {
      {"self_attn.q_proj.", "self_attn.0q."}, {"self_attn.k_proj.", "self_attn.0r."},
      {"self_attn.v_proj.", "self_attn.0s."}, {"mlp.gate_proj.", "mlp.0g."}, {"mlp.up_proj.", "mlp.0h."}};
  for (const auto& [part, key] : kGroups) {
    const size_t at = name.find(part);
    if (at != std::string::npos) return name.substr(0, at) + key + name.substr(at + std::strlen(part));
  }
  return name;
}

}  // namespace

WeightSet upload_weights(const WeightSet& host, Device device, size_t staging_limit) {
  constexpr size_t kAlign = 256;  // cudaMalloc's own alignment; keeps 16-byte vector loads legal
  size_t total = 0;
  for (const auto& [name, t] : host.tensors) total += (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  auto buffer = std::make_shared<DeviceBuffer>(device, total);
  WeightSet out;
  out.source = host.source;
  std::vector<std::pair<std::string, const std::string*>> order;
  for (const auto& [name, t] : host.tensors) order.emplace_back(upload_key(name), &name);
  std::sort(order.begin(), order.end());
  // Weights the device keeps in another layout (ops::device_weight_dtype) go through
  // one staging buffer, rows_per_chunk rows at a time, and are rearranged from there
  // (an 8B model's Q8_0 output matrix is 558 MB: staged whole, a model that barely fits
  // would not load).
  auto rows_per_chunk = [&](const Tensor& t) {
    return std::max<int64_t>(1, std::min<int64_t>(t.rows(), static_cast<int64_t>(staging_limit / t.row_bytes())));
  };
  size_t staging_bytes = 0;
  for (const auto& [name, t] : host.tensors)
    if (ops::device_weight_dtype(t, device) != t.dtype)
      staging_bytes = std::max(staging_bytes, static_cast<size_t>(rows_per_chunk(t)) * t.row_bytes());
  DeviceBuffer staging = staging_bytes ? DeviceBuffer(device, staging_bytes) : DeviceBuffer();
  size_t offset = 0;
  for (const auto& [key, name_ptr] : order) {
    const std::string& name = *name_ptr;
    const Tensor& t = host.tensors.at(name);
    CORVID_CHECK(t.device == Device::CPU, host.source, ": tensor ", name, " is not in host memory");
    Tensor d = t;
    d.device = device;
    d.data = static_cast<char*>(buffer->data()) + offset;
    d.dtype = ops::device_weight_dtype(t, device);
    if (d.dtype == t.dtype) {
      copy_tensor(d, t);
    } else {
      // Rows are independent in the layouts: rearrange a chunk of rows at a time.
      const int64_t chunk = rows_per_chunk(t), cols = t.cols();
      for (int64_t r0 = 0; r0 < t.rows(); r0 += chunk) {
        const int64_t rows = std::min(chunk, t.rows() - r0);
        const size_t at = static_cast<size_t>(r0) * t.row_bytes();
        const Tensor src(t.dtype, {rows, cols}, static_cast<char*>(t.data) + at, Device::CPU);
        const Tensor raw(t.dtype, {rows, cols}, staging.data(), device);
        const Tensor dst(d.dtype, {rows, cols}, static_cast<char*>(d.data) + at, device);
        copy_tensor(raw, src);
        ops::rearrange_weight(raw, dst);  // ordered before the next chunk's copy (one stream)
      }
    }
    out.tensors.emplace(name, d);
    offset += (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  synchronize(device);  // the copies read the mapped files; finish before anyone unmaps them
  out.owners.push_back(std::move(buffer));
  return out;
}

LoadedModel LoadedModel::load(const std::string& path, Device device) {
  LoadedModel m;
  m.device = device;
  m.files = std::make_unique<ModelFiles>(open_model(path));
  if (m.files->gguf) {
    m.tokenizer = Tokenizer::from_gguf(*m.files->gguf);
  } else {
    m.tokenizer = Tokenizer::from_hf_files(m.files->tokenizer_json, m.files->tokenizer_config_json);
  }
  m.bind_model();
  return m;
}

void LoadedModel::bind_model() {
  if (device == Device::CPU) {
    model = std::make_unique<LlamaModel>(files->config, files->weights);
  } else {
    device_weights = std::make_unique<WeightSet>(upload_weights(files->weights, device));
    model = std::make_unique<LlamaModel>(files->config, *device_weights);
  }
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    CORVID_CHECK(fs::exists(dir / "tokenizer.json", ec), path, ": no tokenizer.json (a tokenizer is required)");
    const fs::path config = dir / "tokenizer_config.json";
    return Tokenizer::from_hf_files((dir / "tokenizer.json").string(), fs::exists(config, ec) ? config.string() : "");
  }
  auto gguf = GgufFile::open(path);
  return Tokenizer::from_gguf(*gguf);
}

}  // namespace corvid
