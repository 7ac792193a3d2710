// ModelConfig: the one description of a model's architecture that every loader
// produces (config.json for Hugging Face checkpoints, GGUF metadata for GGUF
// files) and every model family consumes. Field names follow transformers'
// config attributes where one exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace corvid {

// rope_scaling from config.json (transformers' ROPE_INIT_FUNCTIONS).
struct RopeScaling {
  enum class Type { None, Linear, Llama3, Yarn, LongRope };
  Type type = Type::None;
  double factor = 1.0;  // longrope: 0 when the config omits it (then max / original context)
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3: required. yarn: 0 when the config omits it; when given, transformers replaces
  // `factor` by max_position_embeddings / original_max_position_embeddings (DeepSeek-V3 style).
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;  // yarn mscale override
  std::optional<double> mscale, mscale_all_dim;
  bool truncate = true;  // yarn: round correction range to integers (transformers default)
  // longrope (Phi-3's "su"): per-frequency divisors for short and long contexts
  // (rotary_dim / 2 each); original_max_position_embeddings is the pretraining context.
  std::vector<double> short_factor, long_factor;
};

struct ModelConfig {
  std::string architecture;   // config.json model_type, or the GGUF general.architecture
  std::string family;         // the registry's family name (models/registry.h), set when resolved
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;              // explicit in config or hidden_size / heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t rotary_dim = 0;            // dims of each head that rotate (head_dim unless partial)
  bool rope_interleaved = false;     // true: adjacent pairs (GGUF llama q/k layout); false: rotate-half (HF)
  bool tie_word_embeddings = false;
  bool attention_bias = false;       // q/k/v projections carry biases (qwen2)
  bool qk_norm = false;              // RMSNorm on q and k per head (qwen3)
  bool mlp_bias = false;             // gate/up/down projections carry biases (llama `mlp_bias`)
  std::optional<int64_t> sliding_window;  // attention window where the config enables it
  // Layers i >= max_window_layers use the sliding window (qwen2/qwen3 semantics); 0 for
  // mistral, where every layer slides. Meaningless while sliding_window is unset.
  int64_t max_window_layers = 0;
  std::string hidden_act = "silu";
  std::string torch_dtype;           // as stored: "bfloat16", "float16", "float32"
  std::vector<int64_t> bos_token_ids, eos_token_ids;
  std::vector<std::string> layer_types;  // per layer ("full_attention", "sliding_attention", ...) when given

  // Bytes of KV cache one token takes at `bytes_per_elem` (K and V, all layers).
  int64_t kv_bytes_per_token(int bytes_per_elem) const {
    return 2 * num_hidden_layers * num_key_value_heads * head_dim * bytes_per_elem;
  }
};

// generation_config.json defaults (absent fields stay unset).
struct GenerationConfig {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens;
  std::optional<bool> do_sample;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
};

// Defaults of the fields a family's transformers config class fills in when
// config.json leaves them out (each family's registry entry gives its own).
struct ConfigDefaults {
  std::optional<int64_t> num_key_value_heads;  // absent: this; unset → num_attention_heads
  std::optional<int64_t> head_dim;             // absent: this; unset → hidden_size / heads
  int64_t max_position_embeddings = 2048;
  std::vector<int64_t> bos = {1}, eos = {2};
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
};

// A rope_scaling (or rope_parameters) object → RopeScaling; `field` names it in errors.
// Types corvid does not implement fail here, at load.
RopeScaling parse_rope_scaling(const nlohmann::json& rope, const std::string& source, const char* field);

// Parses the fields every decoder family shares from a config.json object; `source`
// names the file in error messages. Which model_types run, and what each family
// reads beyond these, is the model registry's business (models/registry.h). Throws
// corvid::Error for missing or inconsistent fields.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source,
                               const ConfigDefaults& defaults = {});
GenerationConfig parse_generation_config(const nlohmann::json& config, const std::string& source);

}  // namespace corvid
