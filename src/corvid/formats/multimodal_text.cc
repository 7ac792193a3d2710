#include "corvid/formats/multimodal_text.h"

#include <array>
#include <string_view>
#include <utility>

#include "corvid/core/error.h"

namespace corvid {
namespace {

using nlohmann::json;

struct Wrapper {
  const char* model_type;
  const char* text_model_type;
};
constexpr std::array<Wrapper, 2> kWrappers = {{{"gemma3", "gemma3_text"}, {"gemma4", "gemma4_text"}}};

// Where the text model's tensors sit in a wrapper, and what they become.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kTextPrefixes = {{
    {"language_model.model.", "model."},
    {"model.language_model.", "model."},
    {"language_model.lm_head.", "lm_head."},
}};
// The vision and audio towers and their projections into the text model's embeddings
// (Gemma 3: vision_tower, multi_modal_projector; Gemma 4: vision_tower, audio_tower,
// embed_vision, embed_audio), in either layout.
constexpr std::array<std::string_view, 5> kTowerParts = {
    "vision_tower.", "audio_tower.", "multi_modal_projector.", "embed_vision.", "embed_audio."};

bool starts_with(const std::string& s, std::string_view prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool is_tower(const std::string& name) {
  for (std::string_view part : kTowerParts)
    if (starts_with(name, part) || (starts_with(name, "model.") && name.compare(6, part.size(), part) == 0))
      return true;
  return false;
}

}  // namespace

std::string multimodal_wrapper(const json& config) {
  if (!config.is_object()) return {};
  auto it = config.find("model_type");
  if (it == config.end() || !it->is_string()) return {};
  for (const Wrapper& w : kWrappers)
    if (*it == w.model_type) return w.model_type;
  return {};
}

json text_model_config(const json& config, const std::string& source) {
  const std::string wrapper = multimodal_wrapper(config);
  auto it = config.find("text_config");
  if (it == config.end() || !it->is_object())
    fail(source, ": model_type ", wrapper, " (multimodal) needs a text_config object for its language model");
  json text = *it;
  if (!text.contains("model_type")) {
    for (const Wrapper& w : kWrappers)
      if (wrapper == w.model_type) text["model_type"] = w.text_model_type;
  }
  for (const char* key : {"tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype"}) {
    auto top = config.find(key);
    if (top != config.end() && !text.contains(key)) text[key] = *top;
  }
  return text;
}

WeightSet text_model_weights(WeightSet weights, int64_t* dropped) {
  WeightSet out;
  out.owners = std::move(weights.owners);
  out.source = std::move(weights.source);
  int64_t towers = 0;
  for (auto& [name, tensor] : weights.tensors) {
    if (is_tower(name)) {
      ++towers;
      continue;
    }
    std::string renamed = name;
    for (const auto& [from, to] : kTextPrefixes) {
      if (starts_with(name, from)) {
        renamed = std::string(to) + name.substr(from.size());
        break;
      }
    }
    if (!out.tensors.emplace(renamed, tensor).second)
      fail(out.source, ": tensor ", renamed, " appears twice (as ", name, " and under another prefix)");
  }
  if (dropped) *dropped = towers;
  return out;
}

}  // namespace corvid
