// SpeechModel: a Whisper checkpoint opened from disk: its weights on the device, its
// tokenizer and its decoding vocabulary. A folder holds either
// - CTranslate2's files (model.bin, config.json, tokenizer.json: what faster-whisper
//   loads), or
// - a Hugging Face checkpoint (config.json with model_type whisper, model.safetensors,
//   tokenizer.json, generation_config.json).
// A WhisperConfig alone gives made-up weights at real shapes (benchmarks).
#pragma once

#include <memory>
#include <string>

#include "corvid/formats/ctranslate2.h"
#include "corvid/formats/weights.h"
#include "corvid/models/whisper/whisper_model.h"
#include "corvid/speech/whisper_vocab.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

struct SpeechModel {
  std::string path;
  WhisperConfig config;
  WeightSet weights;  // host views (CTranslate2: into `ct2`'s copy; HF: the mapped files)
  std::unique_ptr<WhisperModel> model;
  std::unique_ptr<Tokenizer> tokenizer;  // null for dummy weights
  WhisperVocab vocab;

  // The decoder's KV pools are sized for `capacity` (whisper_kv_pool.h).
  static std::unique_ptr<SpeechModel> load(const std::string& path, Device device,
                                           const WhisperCapacity& capacity = {});
  // Made-up weights of `config`'s shape with the vocabulary of `tokenizer_dir`'s
  // tokenizer (a Whisper model folder), for benchmarks.
  static std::unique_ptr<SpeechModel> dummy(const WhisperConfig& config, const std::string& tokenizer_dir,
                                            Device device, const WhisperCapacity& capacity = {});
};

// Whether `path` is a folder holding a Whisper checkpoint (either layout).
bool is_speech_model(const std::string& path);

// The shapes of the public Whisper checkpoints, for dummy weights: tiny, base, small,
// medium, large-v3 (128 mels), large-v3-turbo (4 decoder layers).
WhisperConfig whisper_shape(const std::string& name);

}  // namespace corvid
