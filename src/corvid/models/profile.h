// ModelProfile: what a checkpoint is and what it needs, resolved from its config
// before any weight is read: its family, what corvid claims about its outputs (the
// oracle each family is checked against, and where corvid knowingly differs), and
// the capabilities a backend must have to run it. make_model refuses a device
// that lacks one up front, with a line that says what and why, instead of failing
// at the first step after the weights are on the GPU.
#pragma once

#include <cstdint>
#include <string>

#include "corvid/core/device.h"

namespace corvid {

struct ModelProfile {
  std::string family, architecture;
  std::string fidelity;
  // Needs:
  int64_t max_head_dim = 0;     // the widest attention head over all layers
  bool sliding_window = false;  // some layer attends to a window only
  bool shared_kv = false;       // some layer reads another layer's keys and values
  bool routed_experts = false;  // some layer is a mixture of experts (ops/moe.h)
};

// Throws corvid::Error naming `source` when `device` cannot run the profile.
void check_profile_on(const ModelProfile& profile, Device device, const std::string& source);

}  // namespace corvid
