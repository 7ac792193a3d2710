#include "corvid/cli/serve_speech.h"

#include <cstdio>
#include <filesystem>

#include "corvid/core/error.h"

namespace corvid::cli {

void add_speech_options(CLI::App& cmd, SpeechArgs& args) {
  cmd.add_option("--speech-model", args.path,
                 "a Whisper model folder (CTranslate2 or Hugging Face): serve /v1/audio/transcriptions and "
                 "/v1/audio/translations too (without -m: only them)");
  cmd.add_option("--speech-model-name", args.name, "the speech model's name for clients (default: the folder name)");
  cmd.add_option("--max-audio-mb", args.max_audio_mb, "largest audio upload (the whole form), MiB (larger get 413)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--speech-max-waiting", args.max_waiting, "transcriptions queued before new ones get 429")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--speech-streams", args.streams,
                 "transcriptions run at once: their encodes and decoder steps are batched; the speech model's "
                 "KV pools are sized for this many up front")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
}

SpeechServing::SpeechServing(const SpeechArgs& args, Device device, DeviceTurns* turns) : args_(args) {
  CORVID_CHECK(is_speech_model(args.path), "--speech-model ", args.path,
               ": not a Whisper model folder (CTranslate2's model.bin or a Hugging Face checkpoint)");
  name_ = args.name;
  if (name_.empty()) {
    std::filesystem::path p(args.path);
    if (p.filename().empty()) p = p.parent_path();  // a folder given with a trailing slash
    name_ = p.filename().string();
  }
  WhisperCapacity capacity;
  capacity.streams = args.streams;
  model_ = SpeechModel::load(args.path, device, capacity);
  SpeechServiceConfig config;
  config.max_waiting = static_cast<size_t>(args.max_waiting);
  config.streams = static_cast<int>(args.streams);
  service_ = std::make_unique<SpeechService>(*model_, config, turns);
}

server::SpeechBackend SpeechServing::backend() {
  return server::SpeechBackend{service_.get(), name_, model_->vocab.multilingual};
}

void SpeechServing::add_limits(server::HttpLimits& limits) const {
  const uint64_t bytes = static_cast<uint64_t>(args_.max_audio_mb) << 20;
  limits.path_body_bytes.emplace_back(std::string(server::kTranscriptionsPath), bytes);
  limits.path_body_bytes.emplace_back(std::string(server::kTranslationsPath), bytes);
}

void SpeechServing::describe_model() const {
  std::printf("corvid serve: %s (Whisper, %.0fM parameters, %s, on %s, %lld streams, %.0f MiB of KV): "
              "/v1/audio/transcriptions%s\n",
              name_.c_str(), static_cast<double>(model_->model->parameter_count()) / 1e6,
              model_->vocab.multilingual ? "multilingual" : "English-only",
              device_backend(model_->model->device()).description().c_str(), static_cast<long long>(args_.streams),
              static_cast<double>(model_->model->pool().bytes()) / (1 << 20),
              model_->vocab.multilingual ? ", /v1/audio/translations" : "");
}

void SpeechServing::describe_try(const std::string& url, bool api_key) const {
  std::printf("corvid serve: try  curl %s/v1/audio/transcriptions%s -F file=@speech.wav -F model=%s\n", url.c_str(),
              api_key ? " -H 'Authorization: Bearer $KEY'" : "", name_.c_str());
}

}  // namespace corvid::cli
