// The speech side of corvid serve (--speech-model): a Whisper model and the workers that
// transcribe with it, for the /v1/audio/ routes beside a text model or alone.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "corvid/core/device.h"
#include "corvid/core/device_turns.h"
#include "corvid/server/audio_api.h"
#include "corvid/server/http.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/speech_service.h"

namespace corvid::cli {

struct SpeechArgs {
  std::string path;          // --speech-model ("": none)
  std::string name;          // --speech-model-name ("": the folder's name)
  int64_t max_audio_mb = 25;  // the audio routes' body limit (OpenAI's 25 MB upload limit)
  int64_t max_waiting = 16;   // transcriptions queued before new ones get 429
  int64_t streams = 4;        // transcriptions run at once, their steps batched (--speech-streams)
};

void add_speech_options(CLI::App& cmd, SpeechArgs& args);

class SpeechServing {
 public:
  // Loads the model on `device`. `turns`: the text engine's, when one shares the device.
  SpeechServing(const SpeechArgs& args, Device device, DeviceTurns* turns);

  server::SpeechBackend backend();
  const std::string& name() const { return name_; }
  const Tokenizer& tokenizer() const { return *model_->tokenizer; }
  // Body limits for the audio routes.
  void add_limits(server::HttpLimits& limits) const;
  // The banner's lines: the model, and a curl example against `url`.
  void describe_model() const;
  void describe_try(const std::string& url, bool api_key) const;
  void shutdown() { service_->shutdown(); }  // finishes what is queued

 private:
  SpeechArgs args_;
  std::string name_;
  std::unique_ptr<SpeechModel> model_;
  std::unique_ptr<SpeechService> service_;
};

}  // namespace corvid::cli
