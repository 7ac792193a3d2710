// Pieces shared by the CLI verbs: common flags, sampling flags, stats output.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "corvid/chat/chat_template.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/models/registry.h"

namespace corvid::cli {

struct CommonOptions {
  std::string model;
  int threads = 0;              // 0: all hardware threads
  std::string device = "auto";  // auto | cuda | cpu
  std::string matmul = "fast";   // fast | exact (ops::QuantizedMatmul)
  std::string kv_cache_dtype = "auto";  // auto or a kv/kv_format.h name
  std::string moe_offload = "0";        // N | all: MoE layers whose experts stay in host memory
  std::string kv_config;                // per-layer KV formats (kv/kv_config.h), a JSON file
  bool kv_rotate = false;               // queries and keys rotated before the cache (ops::hadamard_rotate)
  int64_t kv_quant_start = 0;           // the delayed switch: positions kept in 16 bits before the format
};

void add_common_options(CLI::App& cmd, CommonOptions& opts);
// Applies the options that must take effect before any work (thread count).
void apply_common_options(const CommonOptions& opts);
// Where --device and --moe-offload put the weights (auto: CUDA when built with it and a
// GPU is present).
WeightPlacement weight_placement(const CommonOptions& opts);
// --moe-offload's value as a layer count (WeightPlacement::kAllMoeLayers for "all").
int moe_offload_layers(const std::string& value);
// Opens the model as weight_placement() says.
LoadedModel load_model(const CommonOptions& opts);
// The KV cache format --kv-cache-dtype names for a model on `device` (auto: BF16 on CUDA,
// F32 on the CPU), keys rotated with --kv-rotate; a format the device lacks is an error.
KvFormat kv_cache_format(const CommonOptions& opts, Device device);
// Embeddings run each input once through a short-lived cache: refuses --kv-config,
// --kv-rotate, --kv-quant-start and the rotated (turbo) formats; `who` names the command.
void check_embedding_cache(const CommonOptions& opts, const KvFormat& format, const char* who);
// The format of a --kv-cache-dtype name other than auto (unknown: F32).
KvFormat kv_format_named(const std::string& name);
// The whole file at `path` as bytes; `what` names it in the error when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);
// --kv-config's per-layer formats for `model` (empty without the option), each checked
// against the model's device (a layer's head size is checked when its cache is made).
std::vector<std::optional<KvFormat>> kv_layer_formats(const CommonOptions& opts, const Model& model);

struct SamplingFlags {
  SamplingParams params;
  uint64_t seed = 0;
  bool seed_set = false;
};
void add_sampling_options(CLI::App& cmd, SamplingFlags& flags);
SamplingParams sampling_params(const SamplingFlags& flags, const CLI::App& cmd, const GenerationConfig& defaults);

// "prompt: 12 tokens, 340.1 tok/s | decode: 64 tokens, 51.2 tok/s" on stderr.
void print_stats(const GenerationStats& stats);

// The model's stop tokens, from its metadata (engine/stop_tokens.h); with a chat
// template, also the end-of-turn token it writes.
std::vector<int32_t> stop_token_ids(const LoadedModel& model, const ChatTemplate* chat_template);

void register_generate(CLI::App& app);
void register_chat(CLI::App& app);
void register_inspect(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_template(CLI::App& app);
void register_bench(CLI::App& app);
void register_serve(CLI::App& app);
void register_embed(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_kl(CLI::App& app);
void register_transcribe(CLI::App& app);

}  // namespace corvid::cli
