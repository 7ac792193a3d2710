// GGUF → the loader-neutral model description: ModelConfig from the GGUF
// metadata (`<arch>.*` keys written by llama.cpp's converters) and a WeightSet
// whose tensors carry Hugging Face names, so model code never sees GGUF names.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corvid/formats/gguf.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"

namespace corvid {

// The fields every decoder family shares, from the `<arch>.*` metadata. Which
// architectures run, and what each family reads beyond these (rope layout, sliding
// windows, ...), is the model registry's business (models/registry.h). Throws
// corvid::Error("<path>: ...") for missing or inconsistent metadata.
ModelConfig model_config_from_gguf(const GgufFile& gguf);

// A family's own per-layer tensor name: blk.N.<gguf> is model.layers.N.<hf>.
struct GgufName {
  const char* gguf;
  const char* hf;
};

// GGUF tensor name → Hugging Face name ("blk.3.attn_q.weight" →
// "model.layers.3.self_attn.q_proj.weight"): the family's names first (a block part, or a
// whole global name such as Gemma 4's per_layer_token_embd.weight), then the ones
// llama.cpp's converters share; names without a mapping come back unchanged.
std::string hf_name_from_gguf(const std::string& gguf_name, std::span<const GgufName> family_names = {});

// Every tensor of the file under its HF name; `owners` keeps the GgufFile (and so the
// mapping) alive. Tensors without an HF counterpart (e.g. rope_freqs.weight) keep their GGUF name.
WeightSet gguf_weight_set(std::shared_ptr<GgufFile> gguf, std::span<const GgufName> family_names = {});

}  // namespace corvid
