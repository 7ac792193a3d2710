// WhisperConfig: the shape of a Whisper encoder-decoder, read from a Hugging Face
// config.json (openai/whisper-* layout) or from the tensors of a CTranslate2
// model.bin (which stores no hyperparameters beside its head counts).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace corvid {

class Ct2File;

struct WhisperConfig {
  int64_t n_mels = 80;
  int64_t d_model = 0;
  int64_t encoder_layers = 0, decoder_layers = 0;
  int64_t encoder_heads = 0, decoder_heads = 0;
  int64_t encoder_ffn = 0, decoder_ffn = 0;
  int64_t vocab_size = 0;
  int64_t audio_positions = 1500;  // encoder frames of one 30-s window (after the stride-2 conv)
  int64_t text_positions = 448;    // the decoder's learned positions: its longest sequence
  double layer_norm_eps = 1e-5;    // nn.LayerNorm's default, which Whisper uses throughout

  int64_t encoder_head_dim() const { return d_model / encoder_heads; }
  int64_t decoder_head_dim() const { return d_model / decoder_heads; }
  // Frames of log-mel the encoder takes per window (two per encoder position).
  int64_t input_frames() const { return 2 * audio_positions; }
  // Checks the fields against each other; `source` names the model in errors.
  void validate(const std::string& source) const;
};

// From config.json (model_type whisper). Refuses what corvid does not run
// (another activation, scaled embeddings).
WhisperConfig whisper_config_from_hf(const nlohmann::json& config, const std::string& source);
// From a CTranslate2 WhisperSpec: layer counts and widths from the tensor shapes.
WhisperConfig whisper_config_from_ct2(const Ct2File& file);

}  // namespace corvid
