// Checks a WeightSet against its ModelConfig before any model code runs: every
// tensor the llama-style families (llama, mistral, qwen2, qwen3) need is present
// with the shape the config implies. Catches a config.json that does not match
// its weights, or a GGUF whose metadata disagrees with its tensors, with a message
// naming the tensor instead of a wrong answer or a crash in a kernel.
#pragma once

#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"

namespace corvid {

// Throws corvid::Error("<weights.source>: ...") naming the first missing or
// mis-shaped tensor. Tensors the config does not describe are ignored.
void check_weights(const ModelConfig& config, const WeightSet& weights);

}  // namespace corvid
