#include "corvid/engine/loaded_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "corvid/models/registry.h"
#include "corvid/ops/moe.h"
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

void report_offload(const Model& model, const WeightPlacement& placement) {
  if (placement.moe_offload_layers == 0) return;
  const std::vector<int64_t> layers = model.routed_expert_bytes();
  if (layers.empty()) {
    std::fprintf(stderr, "corvid: --moe-offload: the model has no MoE layers; every weight is on the GPU\n");
    return;
  }
  const size_t n = placement.offloaded_layers(layers.size());
  int64_t staging = 0;
  for (size_t i = 0; i < n; ++i) staging = std::max(staging, ops::expert_staging_bytes(layers[i]));
  std::fprintf(stderr, "corvid: --moe-offload: the routed experts of %zu of %zu MoE layers are in pinned host memory "
               "(%.2f GiB): decode reads the routed ones in place, prompts copy a layer at a time to a %.2f GiB "
               "staging buffer on the GPU\n",
               n, layers.size(), static_cast<double>(model.host_mapped_weight_bytes()) / (1 << 30),
               static_cast<double>(staging) / (1 << 30));
}

LoadedModel LoadedModel::load(const std::string& path, const WeightPlacement& placement) {
  LoadedModel m;
  m.placement = placement;
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
  model = make_model(*files, placement);
  report_offload(*model, placement);
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
