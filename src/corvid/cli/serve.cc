// corvid serve: the OpenAI-compatible HTTP server over the serving engine.
#include <condition_variable>
#include <cstdio>
#include <filesystem>
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
#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
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
  double kv_cache_gb = 1.0;
  int io_threads = 2;
  int64_t max_body_mb = 8;
};

Device serving_device(const CommonOptions& common) {
  const Device device = parse_device(common.device);
  if (device == Device::CPU) return device;
  // The engine's paged attention has no CUDA kernel yet.
  CORVID_CHECK(common.device == "auto",
               "corvid serve runs on the CPU for now (paged attention has no CUDA kernel yet); use --device cpu");
  std::fprintf(stderr, "corvid serve: serving on the CPU (paged attention has no CUDA kernel yet)\n");
  return Device::CPU;
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
  if (a.chat_template_path.empty()) return load_chat_template(a.common.model);
  std::ifstream in(a.chat_template_path, std::ios::binary);
  CORVID_CHECK(in, a.chat_template_path, ": cannot open");
  std::ostringstream source;
  source << in.rdbuf();
  return ChatTemplate(source.str(), ChatTemplate::special_tokens_of_model(a.common.model));
}

void run_serve(const ServeArgs& a) {
  apply_common_options(a.common);
  CORVID_CHECK(a.port >= 0 && a.port <= 65535, "--port must be in [0, 65535], got ", a.port);
  CORVID_CHECK(a.kv_cache_gb > 0, "--kv-cache-gb must be positive, got ", a.kv_cache_gb);
  LoadedModel m = LoadedModel::load(a.common.model, serving_device(a.common));

  EngineConfig config;
  config.kv_cache_bytes = static_cast<int64_t>(a.kv_cache_gb * static_cast<double>(int64_t{1} << 30));
  config.scheduler.max_num_seqs = a.max_num_seqs;
  config.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  config.max_model_len = a.max_model_len;
  config.max_waiting = a.max_waiting;
  Engine engine(*m.model, m.tokenizer.get(), config);

  const std::optional<ChatTemplate> chat_template = serving_template(a);
  if (!chat_template) std::fprintf(stderr, "corvid serve: the model has no chat template: only /v1/completions works\n");
  server::ApiConfig api_config;
  api_config.model_name = model_name(a);
  api_config.api_key = a.api_key;
  api_config.chat_stop_ids = stop_token_ids(m, chat_template ? &*chat_template : nullptr);
  server::ApiServer api(engine, *m.tokenizer, chat_template ? &*chat_template : nullptr, api_config);

  boost::asio::io_context io(a.io_threads);
  server::HttpLimits limits;
  limits.max_body_bytes = static_cast<uint64_t>(a.max_body_mb) << 20;
  server::HttpServer http(io, a.host, static_cast<uint16_t>(a.port),
                          [&api](std::shared_ptr<server::Exchange> exchange) { api.handle(exchange); }, limits);

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

  std::printf("corvid serve: %s (%s, %lld KV blocks of %lld tokens, max_model_len %lld)\n", api_config.model_name.c_str(),
              m.model->config().architecture.c_str(), static_cast<long long>(engine.num_blocks()),
              static_cast<long long>(engine.block_size()), static_cast<long long>(engine.max_model_len()));
  const std::string url = "http://" + a.host + ":" + std::to_string(http.port());
  std::printf("corvid serve: listening on %s/v1\n", url.c_str());
  std::printf("corvid serve: try  curl %s/v1/chat/completions -H 'Content-Type: application/json'%s -d '{\"model\": \"%s\", "
              "\"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}]}'\n",
              url.c_str(), a.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'", api_config.model_name.c_str());
  std::fflush(stdout);

  {
    std::unique_lock<std::mutex> lock(mutex);
    stop_requested.wait(lock, [&] { return stopping; });
  }
  std::fprintf(stderr, "corvid serve: shutting down\n");
  http.stop();
  api.drain();
  api.join_workers();
  engine.shutdown();  // in-flight requests get their "cancelled" event, answered as 503
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // lets those answers reach the clients
  io.stop();
  for (std::thread& t : threads) t.join();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  add_common_options(*cmd, args->common);
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
  cmd->add_option("--kv-cache-gb", args->kv_cache_gb, "memory for the paged KV cache, GiB")->capture_default_str();
  cmd->add_option("--io-threads", args->io_threads, "threads serving HTTP connections")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-body-mb", args->max_body_mb, "largest request body, MiB (larger get 413)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace corvid::cli
