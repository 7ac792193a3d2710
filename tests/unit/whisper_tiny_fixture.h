// The tiny random Whisper checkpoint (tests/data/whisper/tiny-random, made by
// tests/oracle/make_whisper_oracle.py) on the CPU, with the oracle's input features.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "binary_file_util.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/safetensors.h"
#include "corvid/models/whisper/whisper_model.h"
#include "fixture_util.h"

namespace corvid::fixtures {

inline std::filesystem::path tiny_whisper_dir() { return source_dir() / "tests" / "data" / "whisper" / "tiny-random"; }

struct TinyWhisper {
  WeightSet files;  // the model's host views point into it
  WhisperConfig config;
  std::unique_ptr<WhisperModel> model;
  std::vector<float> features, features_short;  // one window each: speech-like, and a short clip padded

  explicit TinyWhisper(const WhisperCapacity& capacity) {
    const std::filesystem::path dir = tiny_whisper_dir();
    files = load_safetensors_checkpoint(dir.string());
    config = whisper_config_from_hf(read_json_file((dir / "config.json").string()), "tiny-random");
    WeightLoader loader(files, WeightPlacement(Device::CPU));
    model = std::make_unique<WhisperModel>(config, loader, capacity);
    features = array_of<float>(dir / "input_features.f32");
    features_short = array_of<float>(dir / "input_features_short.f32");
  }
};

}  // namespace corvid::fixtures
