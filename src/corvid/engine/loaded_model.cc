#include "corvid/engine/loaded_model.h"

#include <filesystem>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"

namespace corvid {

WeightSet upload_weights(const WeightSet& host, Device device) {
  constexpr size_t kAlign = 256;  // cudaMalloc's own alignment; keeps 16-byte vector loads legal
  size_t total = 0;
  for (const auto& [name, t] : host.tensors) total += (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  auto buffer = std::make_shared<DeviceBuffer>(device, total);
  WeightSet out;
  out.source = host.source;
  size_t offset = 0;
  for (const auto& [name, t] : host.tensors) {
    CORVID_CHECK(t.device == Device::CPU, host.source, ": tensor ", name, " is not in host memory");
    Tensor d = t;
    d.device = device;
    d.data = static_cast<char*>(buffer->data()) + offset;
    copy_tensor(d, t);
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
