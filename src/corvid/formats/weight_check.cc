#include "corvid/formats/weight_check.h"

#include <string>
#include <vector>

#include "corvid/core/error.h"

namespace corvid {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Checker {
 public:
  explicit Checker(const WeightSet& w) : w_(w) {}

  // `required`: absent is an error; otherwise only a present tensor is checked.
  void expect(const std::string& name, const std::vector<int64_t>& shape, bool required = true) const {
    auto it = w_.tensors.find(name);
    if (it == w_.tensors.end()) {
      if (required) fail(w_.source, ": missing tensor ", name);
      return;
    }
    const Tensor& t = it->second;
    bool same = t.ndim == static_cast<int>(shape.size());
    for (size_t i = 0; same && i < shape.size(); ++i) same = t.shape[i] == shape[i];
    if (!same)
      fail(w_.source, ": tensor ", name, " has shape ", t.shape_str(), ", the config implies ", shape_str(shape));
  }

 private:
  const WeightSet& w_;
};

}  // namespace

void check_weights(const ModelConfig& c, const WeightSet& w) {
  Checker check(w);
  const int64_t hidden = c.hidden_size, q_dim = c.num_attention_heads * c.head_dim,
                kv_dim = c.num_key_value_heads * c.head_dim, ffn = c.intermediate_size;
  check.expect("model.embed_tokens.weight", {c.vocab_size, hidden});
  check.expect("model.norm.weight", {hidden});
  check.expect("lm_head.weight", {c.vocab_size, hidden}, /*required=*/!c.tie_word_embeddings);

  // Bias tensors: qwen2 has q/k/v biases only; llama/qwen3 attention_bias adds o_proj's
  // too, so o_proj's bias is checked when present rather than required.
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    check.expect(p + "input_layernorm.weight", {hidden});
    check.expect(p + "post_attention_layernorm.weight", {hidden});
    check.expect(p + "self_attn.q_proj.weight", {q_dim, hidden});
    check.expect(p + "self_attn.k_proj.weight", {kv_dim, hidden});
    check.expect(p + "self_attn.v_proj.weight", {kv_dim, hidden});
    check.expect(p + "self_attn.o_proj.weight", {hidden, q_dim});
    check.expect(p + "self_attn.q_proj.bias", {q_dim}, c.attention_bias);
    check.expect(p + "self_attn.k_proj.bias", {kv_dim}, c.attention_bias);
    check.expect(p + "self_attn.v_proj.bias", {kv_dim}, c.attention_bias);
    check.expect(p + "self_attn.o_proj.bias", {hidden}, false);
    check.expect(p + "self_attn.q_norm.weight", {c.head_dim}, c.qk_norm);
    check.expect(p + "self_attn.k_norm.weight", {c.head_dim}, c.qk_norm);
    check.expect(p + "mlp.gate_proj.weight", {ffn, hidden});
    check.expect(p + "mlp.up_proj.weight", {ffn, hidden});
    check.expect(p + "mlp.down_proj.weight", {hidden, ffn});
    check.expect(p + "mlp.gate_proj.bias", {ffn}, c.mlp_bias);
    check.expect(p + "mlp.up_proj.bias", {ffn}, c.mlp_bias);
    check.expect(p + "mlp.down_proj.bias", {hidden}, c.mlp_bias);
  }
}

}  // namespace corvid
