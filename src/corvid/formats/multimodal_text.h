// The language model inside a multimodal checkpoint. Gemma 3 (4B and up) and every
// Gemma 4 ship as *ForConditionalGeneration: config.json nests the text model's
// config under "text_config" beside vision (and audio) configs, and the weights put
// the text model under a prefix next to the towers. corvid runs the text model (no
// image or audio input yet): these helpers turn such a checkpoint into the text-only
// one its family reads, and leave every other checkpoint as it is.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "corvid/formats/weights.h"

namespace corvid {

// The wrapper model_type of a multimodal checkpoint corvid knows ("gemma3", "gemma4"),
// or empty for any other config.
std::string multimodal_wrapper(const nlohmann::json& config);

// The text model's config of a wrapper checkpoint: its "text_config", with the text
// model_type when the section has none and the wrapper's token ids, tie_word_embeddings
// and dtype where the section does not set them. corvid::Error naming `source` when the
// section is missing or not an object.
nlohmann::json text_model_config(const nlohmann::json& config, const std::string& source);

// The wrapper's weights as the text model's: "language_model.model.X" (the layout the
// Hub and transformers' save_pretrained write) and "model.language_model.X" (the
// in-memory one) become "model.X", "language_model.lm_head.weight" becomes
// "lm_head.weight", and the towers' and projectors' tensors are dropped (returned in
// `dropped`). A tensor outside both stays, for the loader to report as unused.
WeightSet text_model_weights(WeightSet weights, int64_t* dropped = nullptr);

}  // namespace corvid
