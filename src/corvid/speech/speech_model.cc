#include "corvid/speech/speech_model.h"

#include <filesystem>

#include "corvid/core/error.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/safetensors.h"
#include "corvid/models/whisper/ct2_weights.h"

namespace corvid {

namespace fs = std::filesystem;

namespace {

bool hf_whisper(const fs::path& dir) {
  const fs::path config = dir / "config.json";
  if (!fs::exists(config) || !fs::exists(dir / "model.safetensors")) return false;
  try {
    const nlohmann::json j = read_json_file(config.string());
    return j.value("model_type", "") == "whisper";
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<Tokenizer> whisper_tokenizer(const fs::path& dir) {
  const fs::path tok = dir / "tokenizer.json";
  CORVID_CHECK(fs::exists(tok), dir.string(), ": no tokenizer.json beside the Whisper weights");
  const fs::path tok_config = dir / "tokenizer_config.json";
  return Tokenizer::from_hf_files(tok.string(), fs::exists(tok_config) ? tok_config.string() : "");
}

nlohmann::json optional_json(const fs::path& p) { return fs::exists(p) ? read_json_file(p.string()) : nlohmann::json(); }

}  // namespace

bool is_speech_model(const std::string& path) {
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  return fs::exists(dir / "model.bin") || hf_whisper(dir);
}

std::unique_ptr<SpeechModel> SpeechModel::load(const std::string& path, Device device,
                                               const WhisperCapacity& capacity) {
  const fs::path dir(path);
  CORVID_CHECK(fs::is_directory(dir), path, ": a Whisper model is a folder (CTranslate2's or Hugging Face's)");
  auto m = std::make_unique<SpeechModel>();
  m->path = path;
  nlohmann::json extras;
  if (fs::exists(dir / "model.bin")) {
    std::shared_ptr<const Ct2File> file = Ct2File::open((dir / "model.bin").string());
    m->config = whisper_config_from_ct2(*file);
    m->weights = whisper_weights_from_ct2(file, m->config);
    extras = optional_json(dir / "config.json");
  } else {
    CORVID_CHECK(hf_whisper(dir), path, ": neither model.bin (CTranslate2) nor a Hugging Face Whisper checkpoint");
    m->config = whisper_config_from_hf(read_json_file((dir / "config.json").string()), path);
    m->weights = load_safetensors_checkpoint(path);
    extras = optional_json(dir / "generation_config.json");
  }
  m->tokenizer = whisper_tokenizer(dir);
  m->vocab = whisper_vocab(*m->tokenizer, m->config.vocab_size, extras, path);
  WeightLoader loader(m->weights, WeightPlacement(device));
  m->model = std::make_unique<WhisperModel>(m->config, loader, capacity);
  return m;
}

std::unique_ptr<SpeechModel> SpeechModel::dummy(const WhisperConfig& config, const std::string& tokenizer_dir,
                                                Device device, const WhisperCapacity& capacity) {
  auto m = std::make_unique<SpeechModel>();
  m->path = "dummy";
  m->config = config;
  m->tokenizer = whisper_tokenizer(tokenizer_dir);
  m->vocab = whisper_vocab(*m->tokenizer, config.vocab_size, optional_json(fs::path(tokenizer_dir) / "config.json"),
                           tokenizer_dir);
  WeightLoader loader("dummy whisper", DType::F16, 1, WeightPlacement(device));
  m->model = std::make_unique<WhisperModel>(config, loader, capacity);
  return m;
}

WhisperConfig whisper_shape(const std::string& name) {
  struct Shape {
    const char* name;
    int64_t d, layers, heads, mels, decoder_layers;
  };
  static constexpr Shape kShapes[] = {
      {"tiny", 384, 4, 6, 80, 4},         {"base", 512, 6, 8, 80, 6},
      {"small", 768, 12, 12, 80, 12},     {"medium", 1024, 24, 16, 80, 24},
      {"large-v3", 1280, 32, 20, 128, 32}, {"large-v3-turbo", 1280, 32, 20, 128, 4},
  };
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    WhisperConfig c;
    c.n_mels = s.mels;
    c.d_model = s.d;
    c.encoder_layers = s.layers;
    c.decoder_layers = s.decoder_layers;
    c.encoder_heads = c.decoder_heads = s.heads;
    c.encoder_ffn = c.decoder_ffn = 4 * s.d;
    c.vocab_size = s.mels == 128 ? 51866 : 51865;
    c.validate(name);
    return c;
  }
  fail("whisper: unknown shape ", name, " (tiny, base, small, medium, large-v3, large-v3-turbo)");
}

}  // namespace corvid
