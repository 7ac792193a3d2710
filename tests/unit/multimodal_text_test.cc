// The language model of a multimodal checkpoint (formats/multimodal_text.h): the text
// config and weight names a wrapper becomes, and that the gemma3_mm / gemma4_mm
// fixtures load as text models with their towers left out (their logits against the
// wrapper in transformers: TinyParity).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/formats/multimodal_text.h"
#include "corvid/models/registry.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using fixtures::fixtures_dir;

TEST(MultimodalText, OnlyKnownWrappersAreUnwrapped) {
  EXPECT_EQ(multimodal_wrapper(json{{"model_type", "gemma3"}}), "gemma3");
  EXPECT_EQ(multimodal_wrapper(json{{"model_type", "gemma4"}}), "gemma4");
  EXPECT_EQ(multimodal_wrapper(json{{"model_type", "gemma3_text"}}), "");
  EXPECT_EQ(multimodal_wrapper(json{{"model_type", "llava"}}), "");
  EXPECT_EQ(multimodal_wrapper(json::array()), "");
}

TEST(MultimodalText, TextConfigInheritsTheWrappersIdsAndTying) {
  const json top = {{"model_type", "gemma3"},
                    {"eos_token_id", json::array({1, 106})},
                    {"tie_word_embeddings", true},
                    {"text_config", {{"hidden_size", 64}, {"eos_token_id", 7}}}};
  const json text = text_model_config(top, "m/config.json");
  EXPECT_EQ(text["model_type"], "gemma3_text");  // the released 4B config's section has none
  EXPECT_EQ(text["eos_token_id"], 7);             // the section's own value wins
  EXPECT_EQ(text["tie_word_embeddings"], true);
  EXPECT_EQ(text["hidden_size"], 64);
  try {
    text_model_config(json{{"model_type", "gemma4"}, {"text_config", 3}}, "m/config.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m/config.json: model_type gemma4 (multimodal) needs a text_config"),
              std::string::npos)
        << e.what();
  }
}

TEST(MultimodalText, WeightsLoseTheirPrefixAndTheTowers) {
  WeightSet w;
  w.source = "m";
  const Tensor t(DType::F32, {1}, nullptr, Device::CPU);
  for (const char* name : {"language_model.model.layers.0.mlp.up_proj.weight", "model.language_model.norm.weight",
                           "language_model.lm_head.weight", "vision_tower.encoder.layers.0.fc1.weight",
                           "model.vision_tower.patch_embedder.weight", "multi_modal_projector.norm.weight",
                           "model.embed_vision.embedding_projection.weight", "model.audio_tower.x",
                           "model.embed_audio.y", "something.else"})
    w.tensors.emplace(name, t);
  int64_t dropped = 0;
  const WeightSet text = text_model_weights(std::move(w), &dropped);
  EXPECT_EQ(dropped, 6);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : text.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"lm_head.weight", "model.layers.0.mlp.up_proj.weight", "model.norm.weight",
                                              "something.else"}));  // the loader reports the last as unused
  WeightSet twice;
  twice.source = "m";
  twice.tensors.emplace("language_model.model.norm.weight", t);
  twice.tensors.emplace("model.language_model.norm.weight", t);
  EXPECT_THROW(text_model_weights(std::move(twice)), Error);
}

TEST(MultimodalText, FixturesLoadAsTheirTextModels) {
  for (const char* name : {"gemma3_mm", "gemma4_mm"}) {
    const ModelFiles files = open_model((fixtures_dir() / name).string());
    EXPECT_FALSE(files.multimodal_wrapper.empty()) << name;
    EXPECT_GT(files.tower_tensors, 0) << name;
    EXPECT_EQ(files.config.family, std::string(name).substr(0, 6)) << name;
    EXPECT_NO_THROW(LoadedModel::load((fixtures_dir() / name).string())) << name;
  }
}

}  // namespace
}  // namespace corvid
