#include "corvid/engine/loaded_model.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "corvid/models/registry.h"
#include "corvid/ops/ops.h"

namespace corvid {

WeightSet upload_weights(const WeightSet& host, Device device, size_t staging_limit) {
  WeightSet out;
  out.source = host.source;
  DeviceBuffer staging;
  for (const auto& [name, t] : host.tensors) {
    CORVID_CHECK(t.device == Device::CPU, host.source, ": tensor ", name, " is not in host memory");
    auto buffer = std::make_shared<DeviceBuffer>(device, t.nbytes());
    Tensor d = t;
    d.device = device;
    d.data = buffer->data();
    d.dtype = ops::device_weight_dtype(t, device);
    upload_tensor(t, d.data, device, staging, staging_limit);
    out.tensors.emplace(name, d);
    out.owners.push_back(std::move(buffer));
  }
  synchronize(device);
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
  runner.reset();
  model = make_model(*files, device);
  runner = std::make_unique<Runner>(*model);
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
