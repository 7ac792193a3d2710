// DecoderBase: what every decoder family's Model holds besides its layers — its
// config, device, per-layer state spec, scratch, weight storage and decode byte
// count — and the Model accessors over them. A family derives from it and writes
// its constructor (the inventory) and forward.
#pragma once

#include <cstdint>
#include <vector>

#include "corvid/models/layers/scratch.h"
#include "corvid/models/model.h"
#include "corvid/models/weight_loader.h"

namespace corvid {

class DecoderBase : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  Device device() const override { return device_; }
  const std::vector<LayerState>& state_spec() const override { return state_; }
  uint64_t buffers_generation() const override { return scratch_.generation; }
  int64_t weight_bytes_per_token() const override { return bytes_per_token_; }
  int64_t parameter_count() const override { return storage_.parameters; }
  int64_t active_parameter_count() const override { return storage_.parameters - inactive_parameters_; }
  int64_t host_mapped_weight_bytes() const override { return storage_.host_mapped_bytes; }
  std::vector<int64_t> routed_expert_bytes() const override { return routed_expert_bytes_; }

 protected:
  DecoderBase(const ModelConfig& config, Device device) : config_(config), device_(device) {
    scratch_.device = device;
  }

  ModelConfig config_;
  Device device_;
  std::vector<LayerState> state_;  // filled by the family's constructor, one entry a layer
  layers::Scratch scratch_;        // the family sets scratch_.dims
  WeightStorage storage_;          // from WeightLoader::finish()
  int64_t bytes_per_token_ = 0;      // what a decode step reads: active weights only
  int64_t inactive_parameters_ = 0;  // experts a token's router does not pick
  std::vector<int64_t> routed_expert_bytes_;  // a sparse layer's routed experts, in layer order
};

}  // namespace corvid
