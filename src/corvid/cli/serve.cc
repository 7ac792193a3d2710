// corvid serve: the OpenAI-compatible (chat, completions, Responses, embeddings, audio) and Anthropic Messages
// HTTP server over the serving engine, with a Whisper model beside it or alone (serve_speech.h).
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "corvid/cli/chat_io.h"
#include "corvid/cli/common.h"
#include "corvid/cli/serve_speech.h"
#include "corvid/core/error.h"
#include "corvid/core/device.h"
#include "corvid/engine/dummy_weights.h"
#include "corvid/engine/embedder.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/pooling.h"
#include "corvid/kv/block_pool.h"
#include "corvid/server/api_server.h"
#include "corvid/server/http.h"

namespace corvid::cli {

namespace {

struct ServeArgs {
  CommonOptions common;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string served_model_name;
  std::string chat_template_path;
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t max_model_len = 0;
  int64_t max_waiting = 1024;
  double kv_cache_gb = 0;               // 0: 1 GiB on the CPU, --gpu-memory-utilization on a GPU
  double gpu_memory_utilization = 0.9;  // share of the GPU's memory corvid may hold in all
  std::string dummy_dtype;              // set: -m is a config.json, weights random (benchmarks)
  std::string tokenizer_path;           // tokenizer (and chat template) from elsewhere than -m
  int io_threads = 2;
  int64_t max_body_mb = 8;
  int64_t responses_store_mb = 64;  // the Responses API's store of finished responses
  std::string task = "auto";        // generate | embed | auto (embed for an encoder)
  bool batched_tokens_given = false;  // --max-num-batched-tokens on the command line
  SpeechArgs speech;                  // --speech-model and its settings
};

// The KV pool's budget: --kv-cache-gb when given; on a GPU otherwise what is left of
// --gpu-memory-utilization × its memory once the weights are loaded (vLLM's rule; the
// remaining share covers activations, logits and library workspaces); 1 GiB on the CPU.
int64_t kv_cache_bytes(const ServeArgs& a, Device device) {
  constexpr double kGiB = static_cast<double>(int64_t{1} << 30);
  if (a.kv_cache_gb > 0) return static_cast<int64_t>(a.kv_cache_gb * kGiB);
  const MemoryInfo mem = device_backend(device).memory_info();
  if (mem.total_bytes == 0) return static_cast<int64_t>(kGiB);
  const double used = static_cast<double>(mem.total_bytes - mem.free_bytes);
  const double budget = a.gpu_memory_utilization * static_cast<double>(mem.total_bytes) - used;
  CORVID_CHECK(budget >= 64.0 * (1 << 20), "--gpu-memory-utilization ", a.gpu_memory_utilization, " leaves ",
               static_cast<int64_t>(budget / (1 << 20)), " MiB for the KV cache after the weights (",
               static_cast<int64_t>(used / (1 << 20)), " MiB of ", mem.total_bytes >> 20,
               " MiB in use): raise it or pass --kv-cache-gb");
  return static_cast<int64_t>(budget);
}

LoadedModel load_serving_model(const ServeArgs& a) {
  const WeightPlacement placement = weight_placement(a.common);
  if (a.dummy_dtype.empty()) {
    LoadedModel m = LoadedModel::load(a.common.model, placement);
    if (!a.tokenizer_path.empty()) m.tokenizer = load_tokenizer(a.tokenizer_path);
    return m;
  }
  CORVID_CHECK(!a.tokenizer_path.empty(), "--dummy-weights needs --tokenizer (the model has no vocabulary of its own)");
  LoadedModel m = load_dummy_model(a.common.model, dummy_weight_dtype(a.dummy_dtype), placement);
  m.tokenizer = load_tokenizer(a.tokenizer_path);
  return m;
}

std::string model_name(const ServeArgs& a) {
  if (!a.served_model_name.empty()) return a.served_model_name;
  std::filesystem::path path(a.common.model);
  if (path.filename().empty()) path = path.parent_path();  // a folder given with a trailing slash
  const std::string name = path.filename().string();
  const std::string gguf = ".gguf";
  if (name.size() > gguf.size() && name.compare(name.size() - gguf.size(), gguf.size(), gguf) == 0)
    return name.substr(0, name.size() - gguf.size());
  return name;
}

std::optional<ChatTemplate> serving_template(const ServeArgs& a) {
  if (a.chat_template_path.empty()) return load_chat_template(a.tokenizer_path.empty() ? a.common.model : a.tokenizer_path);
  std::ifstream in(a.chat_template_path, std::ios::binary);
  CORVID_CHECK(in, a.chat_template_path, ": cannot open");
  std::ostringstream source;
  source << in.rdbuf();
  return ChatTemplate(source.str(), ChatTemplate::special_tokens_of_model(a.common.model));
}

// Serves `api` over HTTP until SIGINT/SIGTERM: `describe(url)` prints what is served
// once listening (the "listening on" line among it); at shutdown `stop_engine` ends the
// engine's work and then `speech` finishes its queue, while the connections are still
// open to hear about it.
void serve_http(const ServeArgs& a, server::ApiServer& api, const std::function<void(const std::string&)>& describe,
                const std::function<void()>& stop_engine, SpeechServing* speech) {
  boost::asio::io_context io(a.io_threads);
  server::HttpLimits limits;
  limits.max_body_bytes = static_cast<uint64_t>(a.max_body_mb) << 20;
  if (speech) speech->add_limits(limits);
  server::HttpServer http(io, a.host, static_cast<uint16_t>(a.port),
                          [&api](std::shared_ptr<server::Exchange> exchange) { api.handle(exchange); }, limits,
                          [&api](int status) { api.count_refused(status); },
                          [&api](int status, const std::string& message, const std::string& target) {
                            return api.refusal_body(status, message, target);
                          });

  std::mutex mutex;
  std::condition_variable stop_requested;
  bool stopping = false;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    stop_requested.notify_all();
  });
  http.start();
  std::vector<std::thread> threads;
  for (int i = 0; i < a.io_threads; ++i) threads.emplace_back([&io] { io.run(); });

  const std::string url = "http://" + a.host + ":" + std::to_string(http.port());
  if (speech) speech->describe_model();
  describe(url);
  if (speech) speech->describe_try(url, !a.api_key.empty());
  std::fflush(stdout);

  {
    std::unique_lock<std::mutex> lock(mutex);
    stop_requested.wait(lock, [&] { return stopping; });
  }
  std::fprintf(stderr, "corvid serve: shutting down\n");
  http.stop();
  api.drain();
  api.join_workers();
  if (stop_engine) stop_engine();  // in-flight requests get their "cancelled" event (503), or finish (embeddings)
  if (speech) speech->shutdown();   // queued transcriptions finish
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // lets those answers reach the clients
  io.stop();
  for (std::thread& t : threads) t.join();
}

// --task embed: the embedder instead of the generation engine, the same HTTP front.
void serve_embeddings(const ServeArgs& a, LoadedModel& m) {
  const PoolingConfig pooling = read_pooling(a.common.model, m.model->state_spec().empty());
  EmbedderConfig config;
  // A step is whole inputs; an encoder keeps nothing, a decoder a pool for one step.
  config.max_batch_tokens = a.batched_tokens_given ? a.max_num_batched_tokens
                                                   : (m.model->state_spec().empty() ? 16384 : 4096);
  config.max_batch_seqs = std::max<int64_t>(a.max_num_seqs, 1);
  config.max_waiting = std::max<int64_t>(a.max_waiting, 1);
  config.kv_format = kv_cache_format(a.common, m.model->device());
  check_embedding_cache(a.common, config.kv_format, "--task embed");
  Embedder embedder(m, pooling, config);
  server::ApiConfig api_config;
  api_config.model_name = model_name(a);
  api_config.api_key = a.api_key;
  server::ApiServer api(embedder, *m.tokenizer, api_config);
  serve_http(a, api, [&](const std::string& url) {
    std::printf("corvid serve: %s (%s on %s, embeddings: %lld dimensions, %s, inputs up to %lld tokens)\n",
                api_config.model_name.c_str(), m.model->config().architecture.c_str(),
                device_backend(m.model->device()).description().c_str(),
                static_cast<long long>(embedder.dimensions()), pooling.describe().c_str(),
                static_cast<long long>(embedder.max_input_tokens()));
    std::printf("corvid serve: listening on %s/v1\n", url.c_str());
    std::printf("corvid serve: try  curl %s/v1/embeddings -H 'Content-Type: application/json'%s -d '{\"model\": \"%s\", "
                "\"input\": \"Hello!\"}'\n",
                url.c_str(), a.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'", api_config.model_name.c_str());
  }, [&embedder] { embedder.shutdown(); }, nullptr);
}

// --speech-model without -m: the audio routes alone.
void serve_speech_only(const ServeArgs& a) {
  SpeechServing speech(a.speech, parse_device(a.common.device), nullptr);
  server::ApiConfig api_config;
  api_config.model_name = speech.name();
  api_config.api_key = a.api_key;
  server::ApiServer api(speech.backend(), speech.tokenizer(), api_config);
  serve_http(a, api, [](const std::string& url) { std::printf("corvid serve: listening on %s/v1\n", url.c_str()); },
             {}, &speech);
}

void run_serve(const ServeArgs& a) {
  apply_common_options(a.common);
  CORVID_CHECK(a.port >= 0 && a.port <= 65535, "--port must be in [0, 65535], got ", a.port);
  CORVID_CHECK(a.kv_cache_gb >= 0, "--kv-cache-gb must be positive, got ", a.kv_cache_gb);
  CORVID_CHECK(a.gpu_memory_utilization > 0 && a.gpu_memory_utilization <= 1,
               "--gpu-memory-utilization must be in (0, 1], got ", a.gpu_memory_utilization);
  CORVID_CHECK(!a.common.model.empty() || !a.speech.path.empty(),
               "serve: give -m MODEL (text), --speech-model PATH (speech), or both");
  if (a.common.model.empty()) return serve_speech_only(a);
  LoadedModel m = load_serving_model(a);
  const bool encoder = m.model->state_spec().empty();
  const std::string task = a.task == "auto" ? (encoder ? "embed" : "generate") : a.task;
  CORVID_CHECK(task == "embed" || !encoder, m.model->config().architecture,
               " is an encoder: it serves embeddings (--task embed), not text");
  if (task == "embed") {
    CORVID_CHECK(a.speech.path.empty(), "--speech-model beside an embeddings model (--task embed) is not supported");
    return serve_embeddings(a, m);
  }
  // Loaded before the KV budget is set: on a GPU its weights come out of the same memory.
  // The two models share the device's backend, so they take turns (core/device_turns.h).
  DeviceTurns turns;
  std::unique_ptr<SpeechServing> speech;
  if (!a.speech.path.empty()) speech = std::make_unique<SpeechServing>(a.speech, m.model->device(), &turns);

  EngineConfig config;
  config.kv_cache_bytes = kv_cache_bytes(a, m.model->device());
  config.kv_format = kv_cache_format(a.common, m.model->device());
  config.kv_layer_formats = kv_layer_formats(a.common, *m.model);
  config.kv_quant_start = a.common.kv_quant_start;
  config.scheduler.max_num_seqs = a.max_num_seqs;
  config.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  config.max_model_len = a.max_model_len;
  config.max_waiting = a.max_waiting;
  if (speech) config.device_turns = &turns;
  Engine engine(*m.runner, m.tokenizer.get(), config);

  const std::optional<ChatTemplate> chat_template = serving_template(a);
  if (!chat_template) std::fprintf(stderr, "corvid serve: the model has no chat template: only /v1/completions works\n");
  server::ApiConfig api_config;
  api_config.model_name = model_name(a);
  api_config.api_key = a.api_key;
  api_config.chat_stop_ids = stop_token_ids(m, chat_template ? &*chat_template : nullptr);
  api_config.responses_store_bytes = static_cast<size_t>(a.responses_store_mb) << 20;
  server::ApiServer api(engine, *m.tokenizer, chat_template ? &*chat_template : nullptr, api_config,
                        speech ? speech->backend() : server::SpeechBackend{});

  serve_http(a, api, [&](const std::string& url) {
    const double kv_gib = static_cast<double>(engine.kv_bytes()) / static_cast<double>(int64_t{1} << 30);
    std::string groups;  // "full 900, sliding 512 300" when the model has more than one KV layer group
    const std::vector<KvGroupStats> group_stats = engine.kv().group_stats();
    for (size_t g = 0; group_stats.size() > 1 && g < group_stats.size(); ++g)
      groups += (g ? ", " : " (") + group_stats[g].name + " " + std::to_string(group_stats[g].blocks_total) +
                (g + 1 == group_stats.size() ? ")" : "");
    // Tokens a GiB of this cache holds (the format decides: q4 holds 7x f32's): the
    // positions the pool holds (a position takes a block in every full group) over its size.
    const int64_t positions = engine.kv().max_positions_per_sequence();
    const double tokens_per_gib = kv_gib > 0 && positions < INT32_MAX ? static_cast<double>(positions) / kv_gib : 0.0;
    std::printf("corvid serve: %s (%s on %s, %lld KV blocks%s of %lld tokens in %s, %.2f GiB: %.0f tokens a GiB, "
                "max_model_len %lld)\n",
                api_config.model_name.c_str(), m.model->config().architecture.c_str(),
                device_backend(m.model->device()).description().c_str(), static_cast<long long>(engine.num_blocks()),
                groups.c_str(), static_cast<long long>(engine.block_size()), kv_format_name(config.kv_format).c_str(),
                kv_gib, tokens_per_gib, static_cast<long long>(engine.max_model_len()));
    std::printf("corvid serve: listening on %s/v1\n", url.c_str());
    std::printf("corvid serve: try  curl %s/v1/chat/completions -H 'Content-Type: application/json'%s -d '{\"model\": \"%s\", "
                "\"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}]}'\n",
                url.c_str(), a.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'", api_config.model_name.c_str());
  }, [&engine] { engine.shutdown(); }, speech.get());
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over OpenAI-compatible (chat, completions, Responses) and Anthropic Messages HTTP APIs");
  add_common_options(*cmd, args->common);
  cmd->get_option("--model")->required(false);  // --speech-model alone serves speech only
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY' (all but /health)");
  cmd->add_option("--served-model-name", args->served_model_name, "the model name clients use (default: the file name)");
  cmd->add_option("--chat-template", args->chat_template_path, "a Jinja file to use instead of the model's chat template");
  cmd->add_option("--max-num-seqs", args->max_num_seqs, "sequences running at once")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", args->max_num_batched_tokens, "tokens in one model step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-model-len", args->max_model_len, "longest prompt + output in tokens (default: the model's context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting", args->max_waiting, "requests queued before new ones get 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--kv-cache-gb", args->kv_cache_gb,
                  "memory for the paged KV cache, GiB (default: 1 on the CPU; on a GPU what --gpu-memory-utilization "
                  "leaves after the weights)");
  cmd->add_option("--gpu-memory-utilization", args->gpu_memory_utilization,
                  "share of the GPU's memory to use in all (weights + KV cache + activations)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer_path,
                  "take the tokenizer and chat template from this GGUF or Hugging Face folder instead of -m");
  cmd->add_option("--dummy-weights", args->dummy_dtype,
                  "-m names a config.json: serve a real-shape model with random weights of this dtype (benchmarks; "
                  "needs --tokenizer)");
  cmd->add_option("--io-threads", args->io_threads, "threads serving HTTP connections")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-body-mb", args->max_body_mb, "largest request body, MiB (larger get 413)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--responses-store-mb", args->responses_store_mb,
                  "memory for stored Responses (store: true, previous_response_id), MiB; the least recently used "
                  "are evicted beyond it (0: keep none)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--task", args->task,
                  "what the server does: generate (chat, completions, Responses, Messages), embed (/v1/embeddings: "
                  "an encoder such as BERT, or a decoder's last-token embeddings), or auto (embed for an encoder)")
      ->check(CLI::IsMember({"auto", "generate", "embed"}))
      ->capture_default_str();
  add_speech_options(*cmd, args->speech);
  cmd->callback([args, cmd] {
    args->batched_tokens_given = cmd->count("--max-num-batched-tokens") > 0;
    run_serve(*args);
  });
}

}  // namespace corvid::cli
