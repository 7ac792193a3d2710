// Rotary-embedding frequencies for a model config, with rope_scaling applied
// exactly as transformers' ROPE_INIT_FUNCTIONS compute them (default, linear,
// llama3, yarn), in float32 like the reference so angles match bit for bit
// where the arithmetic allows.
#pragma once

#include "corvid/formats/model_config.h"
#include "corvid/ops/ops.h"

namespace corvid {

ops::RopeParams make_rope_params(const ModelConfig& config);

}  // namespace corvid
