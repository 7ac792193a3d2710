// Dummy weights: a real-shape model built from a config alone, with random values
// in a realistic range, so large shapes (Llama-3.1-8B, Qwen3-8B) can be benchmarked
// without downloading checkpoints. Output is meaningless; throughput is not.
#pragma once

#include <cstdint>
#include <string>

#include "corvid/engine/loaded_model.h"

namespace corvid {

// Reads `config_path` (a config.json, or a folder holding one) and builds every
// weight its family asks for in `dtype` (norms stay F32, as GGUF stores them),
// then binds the model on `device`. No tokenizer: the result serves `corvid bench`.
// Values: projections uniform with std 1/sqrt(in_features), embeddings std 0.02,
// norms 1 ± 0.05; deterministic for a seed.
// The dtype named as dtype_name() prints it ("BF16", "Q4_K"); throws for anything
// that is not a weight dtype dummy weights can be built in.
DType dummy_weight_dtype(const std::string& name);

LoadedModel load_dummy_model(const std::string& config_path, DType dtype, const WeightPlacement& placement,
                             uint64_t seed = 1);

}  // namespace corvid
