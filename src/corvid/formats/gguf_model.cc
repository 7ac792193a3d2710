#include "corvid/formats/gguf_model.h"

#include <cctype>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/formats/printable.h"

namespace corvid {

namespace {

// Architectures whose families read per-layer arrays (head_count_kv, feed_forward_length)
// themselves: Gemma 4 (sliding and full layers' KV heads, double-wide shared layers).
bool reads_per_layer_arrays(const std::string& arch) { return arch == "gemma4"; }

// head_count_kv may be stored per layer (an array) by newer converters; most of corvid's
// models take one value, so an array must be uniform (else its first layer's value, for
// a family that reads the array itself).
int64_t uniform_int(const GgufFile& g, const std::string& key, int64_t fallback, bool first_of_array) {
  const GgufValue* v = g.find(key);
  if (!v) return fallback;
  if (!std::holds_alternative<GgufArray>(v->value)) return g.get_int(key);
  std::vector<int64_t> all = g.get_int_array(key);
  if (all.empty()) fail(g.path(), ": metadata ", key, " is an empty array");
  if (first_of_array) return all[0];
  for (int64_t x : all)
    if (x != all[0]) fail(g.path(), ": metadata ", key, " differs between layers (not supported)");
  return all[0];
}

int64_t positive(const GgufFile& g, const std::string& key, int64_t v) {
  if (v <= 0) fail(g.path(), ": metadata ", key, " must be positive, not ", v);
  return v;
}

}  // namespace

ModelConfig model_config_from_gguf(const GgufFile& g) {
  ModelConfig c;
  std::string arch = g.get_string("general.architecture");
  if (arch.empty() || arch.size() > 64) fail(g.path(), ": general.architecture '", printable(arch), "' is not a name");
  c.architecture = arch;
  const std::string p = arch + ".";
  const bool per_layer = reads_per_layer_arrays(arch);

  c.num_hidden_layers = positive(g, p + "block_count", g.get_int(p + "block_count"));
  c.hidden_size = positive(g, p + "embedding_length", g.get_int(p + "embedding_length"));
  c.intermediate_size = positive(g, p + "feed_forward_length", uniform_int(g, p + "feed_forward_length", 0, per_layer));
  c.num_attention_heads = positive(g, p + "attention.head_count", uniform_int(g, p + "attention.head_count", 0, per_layer));
  c.num_key_value_heads =
      positive(g, p + "attention.head_count_kv", uniform_int(g, p + "attention.head_count_kv", c.num_attention_heads, per_layer));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(g.path(), ": head_count ", c.num_attention_heads, " is not a multiple of head_count_kv ",
         c.num_key_value_heads);
  if (g.has(p + "attention.key_length")) {
    c.head_dim = positive(g, p + "attention.key_length", g.get_int(p + "attention.key_length"));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(g.path(), ": embedding_length is not a multiple of head_count and no key_length is given");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.rotary_dim = positive(g, p + "rope.dimension_count", g.get_int(p + "rope.dimension_count", c.head_dim));
  if (c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
    fail(g.path(), ": rope.dimension_count ", c.rotary_dim, " does not fit head dim ", c.head_dim);
  c.max_position_embeddings = positive(g, p + "context_length", g.get_int(p + "context_length", 2048));
  c.rms_norm_eps = g.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.rms_norm_eps > 0)) fail(g.path(), ": layer_norm_rms_epsilon must be positive");
  c.rope_theta = g.get_float(p + "rope.freq_base", 10000.0);
  if (!(c.rope_theta > 0)) fail(g.path(), ": rope.freq_base must be positive");

  std::string scaling = g.get_string(p + "rope.scaling.type", "none");
  if (scaling == "linear" || scaling == "yarn") {
    c.rope_scaling.type = scaling == "linear" ? RopeScaling::Type::Linear : RopeScaling::Type::Yarn;
    c.rope_scaling.factor = g.get_float(p + "rope.scaling.factor");
    if (!(c.rope_scaling.factor > 0)) fail(g.path(), ": rope.scaling.factor must be positive");
    int64_t original = g.get_int(p + "rope.scaling.original_context_length", 0);
    if (original > 0 && c.rope_scaling.type == RopeScaling::Type::Yarn) {
      if (original > (int64_t{1} << 40) || c.rope_scaling.factor > 1e6)
        fail(g.path(), ": rope scaling factor ", c.rope_scaling.factor, " or original context ", original,
             " out of range");
      // llama.cpp applies the stored factor as is. Our RopeScaling follows transformers,
      // which derives the factor as max_position_embeddings / original when the original
      // length is given; so the scaled context is stated as original × factor here.
      c.rope_scaling.original_max_position_embeddings = original;
      c.max_position_embeddings = std::llround(static_cast<double>(original) * c.rope_scaling.factor);
    }
  } else if (scaling != "none") {
    fail(g.path(), ": unsupported rope.scaling.type '", printable(scaling), "' (supported: none, linear, yarn)");
  }
  // Llama 3.x GGUFs carry llama3 RoPE scaling only as precomputed per-frequency divisors
  // (tensor rope_freqs.weight, kept under that name); the model divides its frequencies by them.
  // Whether q/k rows were permuted so adjacent pairs rotate together is the family's
  // to say (models/registry.h): llama.cpp's converter does it for llama only.

  // Vocabulary: the explicit key, else the embedding's rows (what the model computes
  // with; may be padded past the tokenizer), else the tokenizer's token count.
  if (g.has(p + "vocab_size")) {
    c.vocab_size = g.get_int(p + "vocab_size");
  } else if (const GgufTensorInfo* e = g.find_tensor("token_embd.weight")) {
    c.vocab_size = e->shape[0];
  } else if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens")) {
    const GgufArray* a = std::get_if<GgufArray>(&tokens->value);
    if (!a) fail(g.path(), ": metadata tokenizer.ggml.tokens is not an array");
    c.vocab_size = static_cast<int64_t>(a->size());
  }
  positive(g, "vocab size", c.vocab_size);

  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (g.has("tokenizer.ggml.bos_token_id")) c.bos_token_ids = {g.get_int("tokenizer.ggml.bos_token_id")};
  if (g.has("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {g.get_int("tokenizer.ggml.eos_token_id")};
  // The end-of-turn token also ends generation for chat models (llama.cpp treats it so).
  if (g.has("tokenizer.ggml.eot_token_id")) {
    int64_t eot = g.get_int("tokenizer.ggml.eot_token_id");
    if (c.eos_token_ids.empty() || c.eos_token_ids[0] != eot) c.eos_token_ids.push_back(eot);
  }
  return c;
}

std::string hf_name_from_gguf(const std::string& name, std::span<const GgufName> family_names) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  for (auto [from, to] : kGlobal)
    if (name == from) return to;
  // A family's own global tensors (Gemma 4's per-layer embeddings): whole names.
  if (name.rfind("blk.", 0) != 0)
    for (const GgufName& n : family_names)
      if (name == n.gguf) return n.hf;

  // blk.<N>.<part>
  if (name.rfind("blk.", 0) != 0) return name;
  size_t i = 4;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == 4 || i - 4 > 6 || i >= name.size() || name[i] != '.') return name;
  const std::string layer = name.substr(4, i - 4);
  const std::string part = name.substr(i + 1);
  for (const GgufName& n : family_names)
    if (part == n.gguf) return "model.layers." + layer + "." + n.hf;
  static const std::pair<const char*, const char*> kLayer[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  for (auto [from, to] : kLayer)
    if (part == from) return "model.layers." + layer + "." + to;
  return name;
}

WeightSet gguf_weight_set(std::shared_ptr<GgufFile> gguf, std::span<const GgufName> family_names) {
  WeightSet w;
  w.source = gguf->path();
  for (const GgufTensorInfo& t : gguf->tensors()) {
    std::string hf = hf_name_from_gguf(t.name, family_names);
    // Two GGUF names can only land on one HF name if the file also holds that HF name
    // verbatim; refuse rather than silently drop one.
    if (!w.tensors.emplace(hf, t.view).second)
      fail(gguf->path(), ": tensors map to the same name ", printable(hf));
  }
  w.owners.push_back(std::move(gguf));
  return w;
}

}  // namespace corvid
