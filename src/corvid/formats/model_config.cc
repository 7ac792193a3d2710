// config.json → ModelConfig, following the defaults of transformers' config
// classes (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config) so a checkpoint
// means here what it means to the oracle. Where transformers would silently
// invent a model size (hidden_size 4096 …) from a missing field, we fail
// instead: a config without its sizes is a broken download, not a 7B model.
#include "corvid/formats/model_config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid {
namespace {

using json = nlohmann::json;

const char* json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a bool";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a float";
    default: return "an integer";
  }
}

// Reads typed fields of one JSON object; a null value counts as absent
// (transformers treats `"x": null` like a missing x for these fields).
class Fields {
 public:
  Fields(const json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  const json* get(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return get(key) != nullptr; }
  bool present(const char* key) const { return obj_.contains(key); }  // even when null

  int64_t integer(const char* key) const {
    const json* v = get(key);
    if (!v) fail(source_, ": missing required field ", prefix_, key);
    return to_int(*v, key);
  }
  int64_t integer(const char* key, int64_t fallback) const {
    const json* v = get(key);
    return v ? to_int(*v, key) : fallback;
  }
  std::optional<int64_t> opt_integer(const char* key) const {
    const json* v = get(key);
    return v ? std::optional<int64_t>(to_int(*v, key)) : std::nullopt;
  }
  double number(const char* key) const {
    const json* v = get(key);
    if (!v) fail(source_, ": missing required field ", prefix_, key);
    return to_double(*v, key);
  }
  double number(const char* key, double fallback) const {
    const json* v = get(key);
    return v ? to_double(*v, key) : fallback;
  }
  std::optional<double> opt_number(const char* key) const {
    const json* v = get(key);
    return v ? std::optional<double>(to_double(*v, key)) : std::nullopt;
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean()) type_error(key, *v, "a bool");
    return v->get<bool>();
  }
  std::optional<bool> opt_boolean(const char* key) const {
    return has(key) ? std::optional<bool>(boolean(key, false)) : std::nullopt;
  }
  std::string string(const char* key, const std::string& fallback) const {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string()) type_error(key, *v, "a string");
    return v->get<std::string>();
  }
  // Token ids are an int or a list of ints (eos_token_id: [128001, 128009]).
  std::vector<int64_t> token_ids(const char* key, std::vector<int64_t> fallback) const {
    if (!present(key)) return fallback;
    const json* v = get(key);
    if (!v) return {};
    if (!v->is_array()) return {to_int(*v, key)};
    std::vector<int64_t> out;
    for (const json& e : *v) out.push_back(to_int(e, key));
    return out;
  }

  [[noreturn]] void type_error(const char* key, const json& v, const char* want) const {
    fail(source_, ": field ", prefix_, key, " must be ", want, ", not ", json_kind(v));
  }

 private:
  int64_t to_int(const json& v, const char* key) const {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(source_, ": field ", prefix_, key, " is too large");
      return v.get<int64_t>();
    }
    // Some exporters write 4096.0; accept floats that are whole numbers.
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    type_error(key, v, "an integer");
  }
  double to_double(const json& v, const char* key) const {
    if (!v.is_number()) type_error(key, v, "a number");
    return v.get<double>();
  }

  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

void check_positive(const std::string& source, const char* key, int64_t v) {
  if (v <= 0) fail(source, ": field ", key, " must be positive, not ", v);
}

}  // namespace

RopeScaling parse_rope_scaling(const json& rs, const std::string& source, const char* field) {
  RopeScaling out;
  if (!rs.is_object()) fail(source, ": field ", field, " must be an object, not ", json_kind(rs));
  Fields f(rs, source, std::string(field) + ".");
  // transformers renamed "type" to "rope_type" and reads either.
  std::string type = f.string("rope_type", f.string("type", "default"));
  if (type == "default") return out;
  if (type == "longrope" || type == "su") {
    out.type = RopeScaling::Type::LongRope;
    auto factors = [&](const char* key) {
      std::vector<double> v;
      auto it = rs.find(key);
      if (it == rs.end() || !it->is_array() || it->empty())
        fail(source, ": ", field, ".", key, " must be a non-empty list of numbers");
      for (const json& e : *it) {
        if (!e.is_number() || !(e.get<double>() > 0)) fail(source, ": ", field, ".", key, " must hold positive numbers");
        v.push_back(e.get<double>());
      }
      return v;
    };
    out.short_factor = factors("short_factor");
    out.long_factor = factors("long_factor");
    if (out.short_factor.size() != out.long_factor.size())
      fail(source, ": ", field, ".short_factor and long_factor differ in length");
    out.factor = f.number("factor", 0.0);
    if (out.factor < 0) fail(source, ": ", field, ".factor must be positive");
    out.attention_factor = f.opt_number("attention_factor");
    // Also a top-level field (Phi-3 keeps it there); parse_model_config fills it in then.
    out.original_max_position_embeddings = f.integer("original_max_position_embeddings", 0);
    return out;
  }
  out.factor = f.number("factor");
  if (out.factor <= 0) fail(source, ": ", field, ".factor must be positive");
  if (type == "linear") {
    out.type = RopeScaling::Type::Linear;
  } else if (type == "llama3") {
    out.type = RopeScaling::Type::Llama3;
    out.low_freq_factor = f.number("low_freq_factor");
    out.high_freq_factor = f.number("high_freq_factor");
    out.original_max_position_embeddings = f.integer("original_max_position_embeddings");
    if (out.high_freq_factor <= out.low_freq_factor)
      fail(source, ": ", field, ".high_freq_factor must exceed low_freq_factor");
    check_positive(source, "rope_scaling.original_max_position_embeddings", out.original_max_position_embeddings);
  } else if (type == "yarn") {
    out.type = RopeScaling::Type::Yarn;
    // Left 0 when absent: its presence changes how transformers derives the factor.
    out.original_max_position_embeddings = f.integer("original_max_position_embeddings", 0);
    // transformers uses `get(...) or default`, so 0 also means the default.
    double bf = f.number("beta_fast", 0.0), bs = f.number("beta_slow", 0.0);
    out.beta_fast = bf != 0.0 ? bf : 32.0;
    out.beta_slow = bs != 0.0 ? bs : 1.0;
    out.attention_factor = f.opt_number("attention_factor");
    out.mscale = f.opt_number("mscale");
    out.mscale_all_dim = f.opt_number("mscale_all_dim");
    out.truncate = f.boolean("truncate", true);
    if (f.has("original_max_position_embeddings"))
      check_positive(source, "rope_scaling.original_max_position_embeddings", out.original_max_position_embeddings);
  } else {
    fail(source, ": unsupported ", field, " type '", type, "' (supported: default, linear, llama3, yarn, longrope)");
  }
  return out;
}

ModelConfig parse_model_config(const json& config, const std::string& source, const ConfigDefaults& d) {
  if (!config.is_object()) fail(source, ": config must be a JSON object, not ", json_kind(config));
  Fields f(config, source);
  ModelConfig c;
  c.architecture = f.string("model_type", "");
  if (c.architecture.empty()) fail(source, ": missing required field model_type");

  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  check_positive(source, "vocab_size", c.vocab_size);
  check_positive(source, "hidden_size", c.hidden_size);
  check_positive(source, "intermediate_size", c.intermediate_size);
  check_positive(source, "num_hidden_layers", c.num_hidden_layers);
  check_positive(source, "num_attention_heads", c.num_attention_heads);

  // num_key_value_heads: an explicit null means "same as attention heads" in every family;
  // absence takes the class default, which differs (mistral 8, qwen 32, llama = heads).
  if (f.has("num_key_value_heads")) c.num_key_value_heads = f.integer("num_key_value_heads");
  else if (!f.present("num_key_value_heads") && d.num_key_value_heads) c.num_key_value_heads = *d.num_key_value_heads;
  else c.num_key_value_heads = c.num_attention_heads;
  check_positive(source, "num_key_value_heads", c.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, ": num_attention_heads ", c.num_attention_heads, " is not a multiple of num_key_value_heads ",
         c.num_key_value_heads);

  if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim");
  } else if (!f.present("head_dim") && d.head_dim) {
    c.head_dim = *d.head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(source, ": hidden_size ", c.hidden_size, " is not a multiple of num_attention_heads ",
           c.num_attention_heads, " and no head_dim is given");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check_positive(source, "head_dim", c.head_dim);

  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  check_positive(source, "max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = f.number("rms_norm_eps", d.rms_norm_eps);
  if (!(c.rms_norm_eps > 0)) fail(source, ": field rms_norm_eps must be positive");
  c.hidden_act = f.string("hidden_act", f.string("hidden_activation", d.hidden_act));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", d.tie_word_embeddings);
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", ""));

  // RoPE: newer transformers nest rope_theta and the scaling inside rope_parameters.
  const json* rope_params = f.get("rope_parameters");
  if (rope_params && !rope_params->is_object())
    fail(source, ": field rope_parameters must be an object, not ", json_kind(*rope_params));
  c.rope_theta = f.number("rope_theta", rope_params ? Fields(*rope_params, source, "rope_parameters.")
                                                          .number("rope_theta", 10000.0)
                                                    : 10000.0);
  if (!(c.rope_theta > 0)) fail(source, ": field rope_theta must be positive");
  if (const json* rs = f.get("rope_scaling"))
    c.rope_scaling = parse_rope_scaling(*rs, source, "rope_scaling");
  else if (rope_params)
    c.rope_scaling = parse_rope_scaling(*rope_params, source, "rope_parameters");
  if (c.rope_scaling.type == RopeScaling::Type::LongRope) {
    int64_t& original = c.rope_scaling.original_max_position_embeddings;
    if (original == 0) original = f.integer("original_max_position_embeddings", 0);
    check_positive(source, "original_max_position_embeddings (longrope)", original);
  }
  double partial = f.number("partial_rotary_factor", 1.0);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
    fail(source, ": partial_rotary_factor ", partial, " gives rotary dim ", c.rotary_dim, " for head_dim ",
         c.head_dim, " (need an even number in 2..head_dim)");
  c.rope_interleaved = false;  // HF checkpoints use rotate-half

  if (const json* types = f.get("layer_types")) {
    if (!types->is_array()) f.type_error("layer_types", *types, "an array");
    for (const json& t : *types) {
      if (!t.is_string()) fail(source, ": field layer_types must hold strings, not ", json_kind(t));
      c.layer_types.push_back(t.get<std::string>());
    }
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
      fail(source, ": layer_types has ", c.layer_types.size(), " entries for ", c.num_hidden_layers, " layers");
  }

  c.bos_token_ids = f.token_ids("bos_token_id", d.bos);
  c.eos_token_ids = f.token_ids("eos_token_id", d.eos);
  return c;
}

GenerationConfig parse_generation_config(const json& config, const std::string& source) {
  if (!config.is_object()) fail(source, ": generation config must be a JSON object, not ", json_kind(config));
  Fields f(config, source);
  GenerationConfig g;
  g.temperature = f.opt_number("temperature");
  g.top_p = f.opt_number("top_p");
  g.min_p = f.opt_number("min_p");
  g.repetition_penalty = f.opt_number("repetition_penalty");
  g.top_k = f.opt_integer("top_k");
  g.max_new_tokens = f.opt_integer("max_new_tokens");
  g.do_sample = f.opt_boolean("do_sample");
  g.eos_token_ids = f.token_ids("eos_token_id", {});
  std::vector<int64_t> bos = f.token_ids("bos_token_id", {});
  if (bos.size() > 1) fail(source, ": field bos_token_id must be one integer");
  if (!bos.empty()) g.bos_token_id = bos[0];
  return g;
}

}  // namespace corvid
