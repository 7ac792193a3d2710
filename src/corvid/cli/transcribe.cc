// corvid transcribe: speech to text with a Whisper model (CTranslate2 or Hugging Face
// folder), as faster-whisper's transcribe() decodes it; each file's transcript goes to
// stdout in the asked format (in the order given), progress and speed to stderr. With
// --streams N, N files are transcribed at once, their steps batched (SpeechService, as
// the server runs them); each gets the transcript it gets alone.
#include <algorithm>
#include <chrono>
#include <future>
#include <cstdio>
#include <memory>
#include <sstream>

#include "corvid/audio/audio_file.h"
#include "corvid/cli/common.h"
#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/speech/speech_model.h"
#include "corvid/speech/speech_service.h"
#include "corvid/speech/transcript_format.h"

namespace corvid::cli {

namespace {

struct TranscribeArgs {
  std::vector<std::string> files;
  std::string model;
  std::string device = "auto";
  int threads = 0;
  std::string language;
  std::string task = "transcribe";
  int beam_size = 5;
  int best_of = 5;
  std::string temperatures = "0,0.2,0.4,0.6,0.8,1.0";
  std::string format = "text";
  std::string initial_prompt;
  bool no_timestamps = false;
  bool no_condition = false;
  bool word_timestamps = false;
  bool progress = false;
  std::string dummy_shape;
  uint64_t seed = 0;
  int streams = 1;
};

std::vector<float> parse_temperatures(const std::string& list) {
  std::vector<float> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stof(item, &used));
      CORVID_CHECK(used == item.size(), "");
    } catch (const std::exception&) {
      fail("--temperature: '", item, "' is not a number");
    }
  }
  CORVID_CHECK(!out.empty(), "--temperature: no temperature given");
  return out;
}

void run_transcribe(const TranscribeArgs& a) {
  ThreadPool::set_global_threads(a.threads);
  const Device device = parse_device(a.device);
  const auto format = transcript_format_named(a.format);
  CORVID_CHECK(format, "--output-format: ", a.format, " (text, json, verbose_json, srt or vtt)");
  TranscribeOptions o;
  if (!a.language.empty()) {
    const auto code = whisper_language_code(a.language);
    CORVID_CHECK(code, "--language: Whisper knows no language '", a.language, "'");
    o.language = *code;
  }
  o.task = a.task;
  o.beam_size = a.beam_size;
  o.best_of = a.best_of;
  o.temperatures = parse_temperatures(a.temperatures);
  o.initial_prompt = a.initial_prompt;
  o.without_timestamps = a.no_timestamps;
  o.condition_on_previous_text = !a.no_condition;
  o.seed = a.seed;
  o.word_timestamps = a.word_timestamps;
  const auto t0 = std::chrono::steady_clock::now();
  const int streams = std::max(1, std::min(a.streams, static_cast<int>(a.files.size())));
  // As many hypotheses as the widest decoding asked for, per stream.
  const WhisperCapacity capacity{streams, std::max<int64_t>({WhisperCapacity{}.hypotheses, a.beam_size, a.best_of}),
                                 1, {}};
  std::unique_ptr<SpeechModel> model =
      a.dummy_shape.empty() ? SpeechModel::load(a.model, device, capacity)
                            : SpeechModel::dummy(whisper_shape(a.dummy_shape), a.model, device, capacity);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "corvid transcribe: %s (%lld parameters) on %s, loaded in %.2f s\n", model->path.c_str(),
               static_cast<long long>(model->model->parameter_count()), device == Device::CUDA ? "cuda" : "cpu",
               load_s);
  auto print = [&](const Transcript& t) {
    std::fputs(format_transcript(t, *format, o.task).c_str(), stdout);
    if (*format == TranscriptFormat::Json || *format == TranscriptFormat::VerboseJson) std::fputs("\n", stdout);
    std::fflush(stdout);
  };
  const auto all_start = std::chrono::steady_clock::now();
  double audio_seconds = 0;
  if (streams == 1) {
    Transcriber transcriber(*model);
    for (const std::string& file : a.files) {
      const audio::Audio audio = audio::resample(audio::read_file(file), audio::kWhisperSampleRate);
      const auto start = std::chrono::steady_clock::now();
      Transcriber::ProgressCallback progress;
      if (a.progress)
        progress = [&](double done, double total) {
          const int width = 40, filled = total > 0 ? static_cast<int>(width * done / total) : width;
          std::fprintf(stderr, "\r[%s%s] %.0f / %.0f s", std::string(static_cast<size_t>(filled), '#').c_str(),
                       std::string(static_cast<size_t>(width - filled), ' ').c_str(), done, total);
          if (done >= total) std::fprintf(stderr, "\n");
        };
      const Transcript t = transcriber.transcribe(audio, o, {}, progress);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      print(t);
      audio_seconds += t.duration;
      std::fprintf(stderr, "corvid transcribe: %s: %.2f s of audio (%s) in %.2f s, %.1fx real time\n", file.c_str(),
                   t.duration, t.language.c_str(), seconds, seconds > 0 ? t.duration / seconds : 0.0);
    }
  } else {
    // Every file decoded first (a bad one fails before any work), then all queued: the
    // service runs `streams` at once; transcripts are printed in the order given.
    std::vector<audio::Audio> audio;
    for (const std::string& file : a.files)
      audio.push_back(audio::resample(audio::read_file(file), audio::kWhisperSampleRate));
    SpeechServiceConfig config;
    config.streams = streams;
    config.max_waiting = a.files.size();
    std::vector<std::promise<Transcript>> results(a.files.size());
    SpeechService service(*model, config);
    for (size_t i = 0; i < a.files.size(); ++i) {
      SpeechCallbacks cb;
      cb.done = [&results, i](Transcript t) { results[i].set_value(std::move(t)); };
      cb.failed = [&results, i](const std::string& e) { results[i].set_exception(std::make_exception_ptr(Error(e))); };
      service.submit(SpeechJob{std::move(audio[i]), o}, std::move(cb));
    }
    for (size_t i = 0; i < a.files.size(); ++i) {
      Transcript t;
      try {
        t = results[i].get_future().get();
      } catch (const Error& e) {
        fail(a.files[i], ": ", e.what());
      }
      print(t);
      audio_seconds += t.duration;
      std::fprintf(stderr, "corvid transcribe: %s: %.2f s of audio (%s)\n", a.files[i].c_str(), t.duration,
                   t.language.c_str());
    }
  }
  if (a.files.size() > 1) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - all_start).count();
    std::fprintf(stderr, "corvid transcribe: %zu files, %.1f s of audio in %.2f s, %.1fx real time (%d streams)\n",
                 a.files.size(), audio_seconds, seconds, seconds > 0 ? audio_seconds / seconds : 0.0, streams);
  }
}

}  // namespace

void register_transcribe(CLI::App& app) {
  auto a = std::make_shared<TranscribeArgs>();
  CLI::App* cmd = app.add_subcommand("transcribe", "Transcribe speech with a Whisper model");
  cmd->add_option("files", a->files, "audio files (wav, flac, ogg/vorbis, ogg/opus, mp3)")->required();
  cmd->add_option("-m,--model", a->model, "Whisper model folder (CTranslate2 or Hugging Face)")->required();
  cmd->add_option("--device", a->device, "where the model runs: auto (CUDA if available), cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  cmd->add_option("-t,--threads", a->threads, "CPU threads (default: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--language", a->language, "spoken language (code or name; default: detected)");
  cmd->add_option("--task", a->task, "transcribe, or translate to English")
      ->check(CLI::IsMember({"transcribe", "translate"}));
  cmd->add_option("--beam-size", a->beam_size, "beam width at temperature 0 (1: greedy)")->check(CLI::Range(1, 16));
  cmd->add_option("--best-of", a->best_of, "samples per fallback temperature")->check(CLI::Range(1, 16));
  cmd->add_option("--temperature", a->temperatures,
                  "temperatures tried in turn when a window decodes badly (comma-separated)");
  cmd->add_option("--output-format", a->format, "text, json, verbose_json, srt or vtt");
  cmd->add_option("--initial-prompt", a->initial_prompt, "text that came before (spelling, style)");
  cmd->add_flag("--no-timestamps", a->no_timestamps, "decode without timestamp tokens (one segment per window)");
  cmd->add_flag("--no-condition-on-previous-text", a->no_condition, "do not prompt a window with the text before it");
  cmd->add_flag("--word-timestamps", a->word_timestamps, "time every word (cross-attention alignment); verbose_json lists the words");
  cmd->add_flag("--progress", a->progress, "a progress bar on stderr (one stream)");
  cmd->add_option("--streams", a->streams,
                  "files transcribed at once, their encodes and decoder steps batched (each gets the transcript "
                  "it gets alone)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--seed", a->seed, "seed of the fallback temperatures' sampling");
  cmd->add_option("--dummy-shape", a->dummy_shape,
                  "made-up weights of a public shape (tiny ... large-v3-turbo); -m gives the tokenizer")
      ->check(CLI::IsMember({"tiny", "base", "small", "medium", "large-v3", "large-v3-turbo"}));
  cmd->callback([a] { run_transcribe(*a); });
}

}  // namespace corvid::cli
