// Qwen2-MoE and Qwen3-MoE (qwen2_moe, qwen3_moe; GGUF qwen3moe): the Llama skeleton
// whose sparse layers replace the MLP with a MoE block (layers/moe.h). Layer i is sparse
// iff i is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
// (num_experts > 0); dense layers keep an MLP of intermediate_size. Qwen3-MoE has
// Qwen3's attention (per-head q/k norms, attention_bias) and no shared expert;
// Qwen2-MoE has Qwen2's q/k/v biases (qkv_bias) and a shared expert of
// shared_expert_intermediate_size behind a sigmoid gate.
//
// From GGUF (llama.cpp's qwen3moe): expert_count, expert_used_count and
// expert_feed_forward_length; llama.cpp runs every layer with an ffn_gate_inp sparse and
// always renormalises the top-k weights, so those are what a GGUF means.
#include <algorithm>

#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/prenorm_decoder.h"

namespace corvid {

namespace {

namespace cf = config_fields;

ConfigDefaults qwen_moe_defaults(const std::string& model_type) {
  ConfigDefaults d;
  d.num_key_value_heads = model_type == "qwen3_moe" ? 4 : 16;
  d.max_position_embeddings = 32768;
  d.bos = {};
  d.eos = {};
  return d;
}

// What the MoE families read beyond ModelConfig.
struct MoeParams {
  layers::MoeShape shape;
  std::vector<bool> sparse;  // per layer
};

MoeParams read_moe_hf(const ModelConfig& c, const nlohmann::json& j, const std::string& source) {
  const bool qwen3 = c.architecture == "qwen3_moe";
  MoeParams m;
  m.shape.experts = cf::integer(j, "num_experts", source).value_or(qwen3 ? 128 : 60);
  m.shape.top_k = cf::integer(j, "num_experts_per_tok", source).value_or(qwen3 ? 8 : 4);
  m.shape.ffn = cf::integer(j, "moe_intermediate_size", source).value_or(qwen3 ? 768 : 1408);
  m.shape.norm_topk = cf::boolean(j, "norm_topk_prob", false, source);
  if (!qwen3) m.shape.shared_ffn = cf::integer(j, "shared_expert_intermediate_size", source).value_or(5632);
  const int64_t step = cf::integer(j, "decoder_sparse_step", source).value_or(1);
  CORVID_CHECK(step >= 1, source, ": decoder_sparse_step must be at least 1, not ", step);
  std::vector<int64_t> dense;
  if (const nlohmann::json* v = cf::find(j, "mlp_only_layers")) {
    CORVID_CHECK(v->is_array(), source, ": field mlp_only_layers must be a list of layer indices");
    for (const nlohmann::json& e : *v) {
      CORVID_CHECK(e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < c.num_hidden_layers, source,
                   ": mlp_only_layers holds ", e.dump(), ", not a layer index below ", c.num_hidden_layers);
      dense.push_back(e.get<int64_t>());
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    m.sparse.push_back(m.shape.experts > 0 && (i + 1) % step == 0 &&
                       std::find(dense.begin(), dense.end(), i) == dense.end());
  if (std::find(m.sparse.begin(), m.sparse.end(), true) != m.sparse.end()) layers::check_moe_shape(m.shape, source);
  return m;
}

MoeParams read_moe_gguf(const ModelConfig& c, const GgufFile& g) {
  const std::string p = c.architecture + ".";
  MoeParams m;
  m.shape.experts = g.get_int(p + "expert_count");
  m.shape.top_k = g.get_int(p + "expert_used_count");
  m.shape.ffn = g.get_int(p + "expert_feed_forward_length");
  m.shape.norm_topk = true;
  layers::check_moe_shape(m.shape, g.path());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    m.sparse.push_back(g.find_tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight") != nullptr);
  return m;
}

MoeParams read_moe(const ModelConfig& c, const FamilySource& src) {
  return src.gguf ? read_moe_gguf(c, *src.gguf) : read_moe_hf(c, *src.hf, src.path);
}

void configure_qwen_moe(ModelConfig& c, const FamilySource& src) {
  const bool qwen3 = c.architecture == "qwen3_moe" || c.architecture == "qwen3moe";
  c.qk_norm = qwen3;
  if (src.gguf) {
    c.attention_bias = src.gguf->find_tensor("blk.0.attn_q.bias") != nullptr;
  } else {
    const nlohmann::json& j = *src.hf;
    c.attention_bias = qwen3 ? cf::boolean(j, "attention_bias", false, src.path) : cf::boolean(j, "qkv_bias", true, src.path);
    CORVID_CHECK(!cf::boolean(j, "use_sliding_window", false, src.path), src.path,
                 ": use_sliding_window is not supported for ", c.architecture, " (no released checkpoint sets it)");
    c.sliding_window.reset();
  }
  read_moe(c, src);  // checks the MoE fields at open, before any weight
}

PreNormSpec qwen_moe_spec(const ModelConfig& c, const FamilySource& src) {
  PreNormSpec spec;
  spec.qk_norm = c.qk_norm;
  spec.qkv_bias = c.attention_bias;
  // Qwen3-MoE's attention_bias puts a bias on o_proj too; Qwen2-MoE's are on q/k/v only.
  spec.o_bias = c.attention_bias && c.architecture != "qwen2_moe";
  const MoeParams m = read_moe(c, src);
  spec.sparse = m.sparse;
  spec.moe = m.shape;
  return spec;
}

const GgufName kQwenMoeNames[] = {
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
    {"ffn_up_exps.weight", "mlp.experts.up_proj"},
    {"ffn_down_exps.weight", "mlp.experts.down_proj"},
};

}  // namespace

Family qwen_moe_family() {
  return {"qwen_moe",
          {"qwen3_moe", "qwen2_moe"},
          {"qwen3moe"},
          qwen_moe_defaults,
          configure_qwen_moe,
          kQwenMoeNames,
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) {
            return make_prenorm_decoder(c, qwen_moe_spec(c, src), w);
          },
          "transformers 5.17 on tiny random-weight fixtures (logits within 1e-3, greedy identical: qwen3_moe, "
          "qwen3_moe_fused, qwen3_moe_dense_layers, qwen2_moe with a shared expert, qwen3moe_gguf in llama.cpp's layout; "
          "on CUDA too, Exact within 6e-5); mlx-lm 0.32.2 greedy on qwen3_moe "
          "and qwen3_moe_dense_layers; experts equal in router probability go to the lower index (torch.topk leaves that order "
          "unspecified)",
          [](ModelProfile& p, const ModelConfig& c, const FamilySource& src) {
            const std::vector<bool> sparse = read_moe(c, src).sparse;
            p.routed_experts = std::find(sparse.begin(), sparse.end(), true) != sparse.end();
          }};
}

}  // namespace corvid
