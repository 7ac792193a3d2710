// GGUF → the loader-neutral model description: ModelConfig from the GGUF
// metadata (`<arch>.*` keys written by llama.cpp's converters) and a WeightSet
// whose tensors carry Hugging Face names, so model code never sees GGUF names.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "corvid/formats/gguf.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/weights.h"

namespace corvid {

// GGUF general.architecture values this build can run.
const std::vector<std::string>& supported_gguf_architectures();

// Throws corvid::Error("<path>: ...") for an unsupported architecture or missing
// or inconsistent metadata. Note rope_interleaved: llama.cpp's converter permutes
// the q/k rows of `llama` models for adjacent-pair RoPE, so for arch llama it is
// true; qwen2/qwen3 keep HF's rotate-half layout (false).
ModelConfig model_config_from_gguf(const GgufFile& gguf);

// GGUF tensor name → Hugging Face name ("blk.3.attn_q.weight" →
// "model.layers.3.self_attn.q_proj.weight"); names without a mapping come back unchanged.
std::string hf_name_from_gguf(const std::string& gguf_name);

// Every tensor of the file under its HF name; `owners` keeps the GgufFile (and so the
// mapping) alive. Tensors without an HF counterpart (e.g. rope_freqs.weight) keep their GGUF name.
WeightSet gguf_weight_set(std::shared_ptr<GgufFile> gguf);

}  // namespace corvid
