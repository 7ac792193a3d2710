// A model bound to a checkpoint's weights with its runner, for tests that build
// models from ModelFiles (or from an edited config or weight set).
#pragma once

#include <memory>

#include "corvid/engine/runner.h"
#include "corvid/formats/model_files.h"
#include "corvid/models/registry.h"

namespace corvid {

struct BoundModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Runner> runner;

  explicit BoundModel(const ModelFiles& files, Device device = Device::CPU)
      : BoundModel(files.config, files, files.weights, device) {}
  // files' config.json / GGUF metadata with `config` and `weights` in place of its own.
  BoundModel(const ModelConfig& config, const ModelFiles& files, const WeightSet& weights,
             Device device = Device::CPU)
      : model(make_model(config, FamilySource{files.gguf ? nullptr : &files.config_json, files.gguf.get(), files.path},
                         weights, device)),
        runner(std::make_unique<Runner>(*model)) {}
  Runner& operator*() const { return *runner; }
  const std::vector<LayerState>& spec() const { return model->state_spec(); }
};

}  // namespace corvid
