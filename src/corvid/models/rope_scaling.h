// Rotary-embedding frequencies for a model config, with rope_scaling applied
// exactly as transformers' ROPE_INIT_FUNCTIONS compute them (default, linear,
// llama3, yarn, longrope), in float32 like the reference so angles match bit for
// bit where the arithmetic allows.
//
// longrope is fixed per model, where transformers switches per forward call: the
// long factors whenever the model's context (max_position_embeddings) exceeds the
// pretraining one (original_max_position_embeddings), else the short ones — what
// llama.cpp does for a context past the original. transformers uses the short
// factors while a call's positions stay within the original context, so on such a
// model corvid matches it for sequences past that length (and for models whose
// context is the original), and differs on shorter ones. A per-forward switch would
// make a token's keys depend on the batch it ran in, and a cached prefix on the
// length of the prompt that made it.
#pragma once

#include "corvid/formats/model_config.h"
#include "corvid/ops/ops.h"

namespace corvid {

ops::RopeParams make_rope_params(const ModelConfig& config);
// The same with another base and scaling (families whose layer kinds rotate differently:
// Gemma's sliding layers at theta 1e4 unscaled, its global ones at 1e6 scaled).
ops::RopeParams make_rope_params(const ModelConfig& config, double theta, const RopeScaling& scaling);
// A rotation by zero (every frequency 0): what a layer without positional encoding
// (NoPE) stores and attends with, bit for bit its unrotated q and k.
ops::RopeParams identity_rope(int64_t head_dim);

}  // namespace corvid
