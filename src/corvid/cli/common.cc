#include "corvid/cli/common.h"

#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/engine/stop_tokens.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_config.h"
#include "corvid/ops/ops.h"

namespace corvid::cli {

namespace {

// --kv-cache-dtype's values: auto, then every format's name.
std::vector<std::string> kv_dtype_choices() {
  std::vector<std::string> v{"auto"};
  for (const std::string& name : kv_format_names()) v.push_back(name);
  return v;
}

}  // namespace

void add_common_options(CLI::App& cmd, CommonOptions& opts) {
  cmd.add_option("-m,--model", opts.model, "GGUF file or Hugging Face model folder")->required();
  cmd.add_option("-t,--threads", opts.threads, "CPU threads (default: all)")->check(CLI::NonNegativeNumber);
  cmd.add_option("--device", opts.device, "where the model runs: auto (CUDA if available), cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  cmd.add_option("--matmul", opts.matmul,
                 "numerics: fast (CPU: 8-bit activations for quantized weights, llama.cpp's numerics; GPU: "
                 "tensor-core bf16 prompts) or exact (F32 throughout, transformers' numerics; slower prefill)")
      ->check(CLI::IsMember({"fast", "exact"}));
  cmd.add_option("--kv-cache-dtype", opts.kv_cache_dtype,
                 "KV cache format: auto (bf16 on a GPU, f32 on the CPU), f32, f16 / bf16 (GPU only: half "
                 "the memory and the bytes decode attention reads), affine codes as mlx-lm's quantized cache "
                 "makes them: q8 / q4 (8.5 / 4.5 bits a value, groups of 64), q8_g32 / q4_g32 (9 / 5 bits, groups of "
                 "32), fp8 (e4m3 with a scale per 64 values, 8.5 bits), or TurboQuant turbo:kXvY (keys and values "
                 "rotated, X-bit keys and Y-bit values, X and Y in 8, 4, 3, 2: Lloyd-Max codes with a norm per 64 "
                 "values, 8 = int8; e.g. turbo:k8v3, turbo:k4v3; on a GPU X > Y or X = Y; head_dim a power of 2)")
      ->check(CLI::IsMember(kv_dtype_choices()));
  cmd.add_option("--kv-config", opts.kv_config,
                 "per-layer KV formats, a JSON file of rules, e.g. {\"rules\": [{\"layers\": [0, -1], \"format\": "
                 "\"f32\"}, {\"kind\": \"sliding\", \"format\": \"q4\"}]} (docs/kv-cache.md); other layers take "
                 "--kv-cache-dtype")
      ->check(CLI::ExistingFile);
  cmd.add_flag("--kv-rotate", opts.kv_rotate,
               "rotate queries and keys by a fixed randomised Hadamard transform before the cache (scores unchanged; "
               "a quantized key's large channels spread over all of them), as llama.cpp does for q4_0 KV; "
               "head_dim a power of 2");
  cmd.add_option("--kv-quant-start", opts.kv_quant_start,
                 "the delayed switch: a sequence's first N positions stay in bf16 (f32 on the CPU) in every layer "
                 "of a coded --kv-cache-dtype (q8, q4, fp8, turbo), the rest is coded; N is rounded up to whole "
                 "KV blocks in the server (docs/kv-cache.md). 0: code every position")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--moe-offload", opts.moe_offload,
                 "keep the routed experts of the first N MoE layers (or 'all') in pinned host memory, read in place "
                 "by the GPU: a MoE model larger than the GPU runs, those layers at the host link's speed (GPU only)");
}

int moe_offload_layers(const std::string& value) {
  if (value == "all") return WeightPlacement::kAllMoeLayers;
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  CORVID_CHECK(used == value.size() && n >= 0, "--moe-offload ", value, ": expected a number of layers or 'all'");
  return n;
}

WeightPlacement weight_placement(const CommonOptions& opts) {
  return WeightPlacement(parse_device(opts.device), moe_offload_layers(opts.moe_offload));
}

KvFormat kv_format_named(const std::string& name) { return kv_format_from_name(name).value_or(DType::F32); }

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  CORVID_CHECK(in, what, ": cannot read ", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

namespace {

bool format_on(const KvFormat& f, Device device) { return ops::kv_cache_pair_supported(f.keys, f.values, device); }

}  // namespace

std::vector<std::optional<KvFormat>> kv_layer_formats(const CommonOptions& opts, const Model& model) {
  if (opts.kv_config.empty()) return {};
  const std::string text = read_text_file(opts.kv_config, "--kv-config");
  std::vector<std::optional<KvFormat>> formats = kv_layer_formats(text, model.state_spec(), opts.kv_config);
  for (std::optional<KvFormat>& f : formats) {
    if (!f) continue;
    CORVID_CHECK(format_on(*f, model.device()), "--kv-config ", opts.kv_config, ": ", kv_format_name(*f),
                 " is not available on ", device_name(model.device()));
    f->rotate_keys |= opts.kv_rotate;  // --kv-rotate holds for every layer
  }
  return formats;
}

KvFormat kv_cache_format(const CommonOptions& opts, Device device) {
  KvFormat f = opts.kv_cache_dtype == "auto" ? KvFormat(default_kv_dtype(device)) : kv_format_named(opts.kv_cache_dtype);
  CORVID_CHECK(format_on(f, device), "--kv-cache-dtype ", opts.kv_cache_dtype, " is not available on ",
               device_name(device), " (f16 / bf16 need a GPU; on a GPU turbo:kXvY needs X > Y or X = Y)");
  f.rotate_keys |= opts.kv_rotate;
  return f;
}

void check_embedding_cache(const CommonOptions& opts, const KvFormat& format, const char* who) {
  CORVID_CHECK(opts.kv_config.empty() && !format.rotated() && opts.kv_quant_start == 0,
               "--kv-config / --kv-rotate / --kv-quant-start / turbo: ", who,
               " runs each input once through a short-lived cache; give a plain --kv-cache-dtype");
}

void apply_common_options(const CommonOptions& opts) {
  ThreadPool::set_global_threads(opts.threads);
  ops::set_quantized_matmul(opts.matmul == "exact" ? ops::QuantizedMatmul::Exact : ops::QuantizedMatmul::Fast);
}

LoadedModel load_model(const CommonOptions& opts) { return LoadedModel::load(opts.model, weight_placement(opts)); }

void add_sampling_options(CLI::App& cmd, SamplingFlags& f) {
  cmd.add_option("--temperature,--temp", f.params.temperature, "0 = greedy (default: the model's generation_config, else 0)");
  cmd.add_option("--top-k", f.params.top_k, "keep the k most likely tokens (0 = off)");
  cmd.add_option("--top-p", f.params.top_p, "nucleus sampling mass (1 = off)");
  cmd.add_option("--min-p", f.params.min_p, "drop tokens below min-p x the top probability (0 = off)");
  cmd.add_option("--repetition-penalty", f.params.repetition_penalty, "HF-style repetition penalty (1 = off)");
  cmd.add_option("--presence-penalty", f.params.presence_penalty, "OpenAI-style presence penalty");
  cmd.add_option("--frequency-penalty", f.params.frequency_penalty, "OpenAI-style frequency penalty");
  cmd.add_option("--seed", f.seed, "RNG seed; the same seed reproduces a run");
}

SamplingParams sampling_params(const SamplingFlags& f, const CLI::App& cmd, const GenerationConfig& g) {
  SamplingParams p = f.params;
  auto unset = [&](const char* flag) { return cmd.count(flag) == 0; };
  // The checkpoint's generation_config supplies defaults for what the user did not set.
  if (unset("--temperature") && g.do_sample.value_or(false) && g.temperature) p.temperature = static_cast<float>(*g.temperature);
  if (unset("--top-k") && g.do_sample.value_or(false) && g.top_k) p.top_k = static_cast<int>(*g.top_k);
  if (unset("--top-p") && g.do_sample.value_or(false) && g.top_p) p.top_p = static_cast<float>(*g.top_p);
  if (unset("--min-p") && g.do_sample.value_or(false) && g.min_p) p.min_p = static_cast<float>(*g.min_p);
  if (unset("--repetition-penalty") && g.repetition_penalty) p.repetition_penalty = static_cast<float>(*g.repetition_penalty);
  if (!unset("--seed")) p.seed = f.seed;
  p.validate();
  return p;
}

void print_stats(const GenerationStats& s) {
  std::fprintf(stderr, "\nprompt: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s\n",
               static_cast<long long>(s.prompt_tokens), s.prefill_tok_s(), static_cast<long long>(s.generated_tokens),
               s.decode_tok_s());
}

std::vector<int32_t> stop_token_ids(const LoadedModel& model, const ChatTemplate* chat_template) {
  return corvid::stop_token_ids(model.tokenizer.get(), model.model->config(), &model.files->generation, chat_template);
}

}  // namespace corvid::cli
