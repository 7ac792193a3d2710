// corvid inspect: what a model file holds and what it needs to run.
#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "corvid/cli/common.h"
#include "corvid/kv/kv_config.h"
#include "corvid/ops/moe.h"

namespace corvid::cli {

namespace {

struct InspectArgs {
  std::string path;
  double memory_gb = 8.0;
  int kv_bytes = 0;                   // --kv-bytes (older spelling of the element size)
  std::string kv_cache_dtype = "f32";  // f32 | f16 | bf16, as the other verbs' --kv-cache-dtype
  std::string moe_offload = "0";       // as the other verbs' --moe-offload: experts kept in host memory
};

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

void run_inspect(const InspectArgs& a) {
  ModelFiles files = open_model(a.path);
  const ModelConfig& c = files.config;
  std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;  // dtype -> (tensors, bytes)
  int64_t params = 0, bytes = 0;
  for (const auto& [name, t] : files.weights.tensors) {
    auto& entry = by_dtype[std::string(dtype_name(t.dtype))];
    entry.first += 1;
    entry.second += static_cast<int64_t>(t.nbytes());
    params += t.numel();
    bytes += static_cast<int64_t>(t.nbytes());
  }
  std::printf("model:          %s\n", a.path.c_str());
  std::printf("format:         %s\n", files.gguf ? "GGUF" : "safetensors");
  std::printf("architecture:   %s (family %s)\n", c.architecture.c_str(), c.family.c_str());
  if (!files.multimodal_wrapper.empty())
    std::printf("multimodal:     %s checkpoint, language model only (%lld vision/audio tensors not loaded)\n",
                files.multimodal_wrapper.c_str(), static_cast<long long>(files.tower_tensors));
  std::printf("layers:         %lld\n", static_cast<long long>(c.num_hidden_layers));
  std::printf("hidden size:    %lld (intermediate %lld)\n", static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.intermediate_size));
  std::printf("heads:          %lld query, %lld key/value, head_dim %lld\n", static_cast<long long>(c.num_attention_heads),
              static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim));
  std::printf("vocabulary:     %lld\n", static_cast<long long>(c.vocab_size));
  std::printf("context:        %lld (rope theta %g%s)\n", static_cast<long long>(c.max_position_embeddings), c.rope_theta,
              c.rope_scaling.type == RopeScaling::Type::None ? "" : ", scaled");
  std::printf("parameters:     %lld (%.1fM)\n", static_cast<long long>(params), static_cast<double>(params) / 1e6);
  std::printf("weights:        %s\n", human_bytes(static_cast<double>(bytes)).c_str());
  for (const auto& [dtype, entry] : by_dtype)
    std::printf("  %-6s        %lld tensors, %s\n", dtype.c_str(), static_cast<long long>(entry.first),
                human_bytes(static_cast<double>(entry.second)).c_str());
  // The model's own state spec (binding it on the CPU reads no weight data: views into
  // the mapped files, checked against the config).
  const std::unique_ptr<Model> model = make_model(files, Device::CPU);
  if (model->active_parameter_count() != model->parameter_count())
    std::printf("active:         %lld parameters a token (%.1fM; routed experts), %s of weights read a token\n",
                static_cast<long long>(model->active_parameter_count()),
                static_cast<double>(model->active_parameter_count()) / 1e6,
                human_bytes(static_cast<double>(model->weight_bytes_per_token())).c_str());
  // --moe-offload N: the first N sparse layers' experts live in host memory, so the
  // device budget below holds the rest.
  const WeightPlacement offload(Device::CUDA, moe_offload_layers(a.moe_offload));
  // The device keeps one staging copy of the largest offloaded layer for prompts
  // (ops::Experts::staging), so an offload frees its layers' experts less that buffer.
  int64_t offloaded = 0;
  if (offload.moe_offload_layers != 0) {
    const std::vector<int64_t> experts = model->routed_expert_bytes();
    const size_t n = offload.offloaded_layers(experts.size());
    int64_t staging = 0;
    for (size_t i = 0; i < n; ++i) {
      offloaded += experts[i];
      staging = std::max(staging, ops::expert_staging_bytes(experts[i]));
    }
    offloaded -= staging;
    std::printf("offloaded:      routed experts of %zu of %zu MoE layers in host memory (%s), one layer's staging "
                "copy on the device (%s); %s on the device\n",
                n, experts.size(), human_bytes(static_cast<double>(offloaded + staging)).c_str(),
                human_bytes(static_cast<double>(staging)).c_str(),
                human_bytes(static_cast<double>(bytes - offloaded)).c_str());
  }
  const std::vector<LayerState>& spec = model->state_spec();
  int64_t full = 0, sliding = 0, shared = 0, window = 0;
  for (const LayerState& s : spec) {
    full += s.kind == StateKind::FullKV;
    sliding += s.kind == StateKind::SlidingKV;
    shared += s.kind == StateKind::SharedKV;
    if (s.kind == StateKind::SlidingKV) window = s.window;
  }
  std::printf("layer state:    %lld full attention", static_cast<long long>(full));
  if (sliding) std::printf(", %lld sliding (window %lld)", static_cast<long long>(sliding), static_cast<long long>(window));
  if (shared) std::printf(", %lld sharing another layer's KV", static_cast<long long>(shared));
  std::printf("\n");
  const ModelProfile profile =
      model_profile(c, FamilySource{files.gguf ? nullptr : &files.config_json, files.gguf.get(), files.path});
  std::printf("fidelity:       %s\n", profile.fidelity.c_str());
  std::printf("needs:          attention heads up to %lld%s%s%s\n", static_cast<long long>(profile.max_head_dim),
              profile.sliding_window ? ", sliding windows" : "", profile.shared_kv ? ", shared KV" : "",
              profile.routed_experts ? ", routed experts" : "");
  // Bytes per element: a plain type's size, or a coded format's codes and scales over its
  // group (q8: 68 bytes for 64 values); TurboQuant's keys and values on average.
  const KvFormat kv_format = kv_format_named(a.kv_cache_dtype);
  const DTypeInfo &key_info = dtype_info(kv_format.keys), &value_info = dtype_info(kv_format.values);
  const int group = std::max(key_info.block_elems, value_info.block_elems);
  const double elem_bytes =
      a.kv_bytes > 0 ? a.kv_bytes
                     : (static_cast<double>(key_info.block_bytes) / key_info.block_elems +
                        static_cast<double>(value_info.block_bytes) / value_info.block_elems) / 2;
  // Full-attention layers keep every position; a sliding layer holds its window (the
  // engine frees blocks that leave it), so it costs a fixed amount per sequence.
  int64_t full_elems = 0, window_elems = 0;
  for (const LayerState& s : spec) {
    if (s.kind == StateKind::FullKV) full_elems += 2 * s.kv_heads * s.head_dim;
    if (s.kind == StateKind::SlidingKV) window_elems += 2 * s.kv_heads * s.head_dim * s.window;
  }
  const double kv_per_token = static_cast<double>(full_elems) * elem_bytes;
  const double kv_windows = static_cast<double>(window_elems) * elem_bytes;
  std::printf("KV per token:   %s (%g-byte elements)", human_bytes(kv_per_token).c_str(), elem_bytes);
  if (kv_windows > 0) std::printf(", plus %s a sequence for the sliding windows", human_bytes(kv_windows).c_str());
  std::printf("\n");
  if (kv_per_token > 0)
    std::printf("KV tokens/GiB:  %lld\n", static_cast<long long>(1024.0 * 1024.0 * 1024.0 / kv_per_token));
  for (const LayerState& s : spec)
    if (a.kv_bytes == 0 && s.head_dim % group != 0) {
      std::printf("note:           head_dim %lld is not a whole number of %d-value groups: a %s cache cannot hold it\n",
                  static_cast<long long>(s.head_dim), group, a.kv_cache_dtype.c_str());
      break;
    }
  const double budget =
      a.memory_gb * 1024.0 * 1024.0 * 1024.0 - static_cast<double>(bytes - offloaded) - kv_windows;
  const int64_t fits = budget <= 0 ? 0 : kv_per_token > 0 ? static_cast<int64_t>(budget / kv_per_token) : INT32_MAX;
  std::printf("fits in %.1f GiB: %lld tokens of context%s\n", a.memory_gb, static_cast<long long>(fits),
              fits > c.max_position_embeddings ? " (more than the model's maximum)" : "");
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: architecture, parameters, dtypes, memory");
  cmd->add_option("path", args->path, "GGUF file or Hugging Face model folder")->required();
  cmd->add_option("--memory-gb", args->memory_gb, "memory budget for the context estimate (GiB)")->check(CLI::PositiveNumber);
  auto* dtype = cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype,
                                "KV cache element type for the context estimate: f32 (the CPU's), f16 or bf16 (a "
                                "GPU's default), the affine q8 / q4 (groups of 64) and q8_g32 / q4_g32, fp8, or turbo:kXvY")
                    ->check(CLI::IsMember(kv_format_names()));
  cmd->add_option("--kv-bytes", args->kv_bytes, "bytes per KV element (4 = f32, 2 = bf16)")
      ->check(CLI::Range(1, 4))
      ->excludes(dtype);
  cmd->add_option("--moe-offload", args->moe_offload,
                  "count the routed experts of the first N MoE layers (or 'all') as host memory, as serve's "
                  "--moe-offload keeps them, in the context estimate");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace corvid::cli
