// BERT-style encoders (model_type bert: all-MiniLM-L6-v2 and the other
// sentence-transformers BERTs). Word + absolute position + token-type embeddings
// and a LayerNorm, then post-LN blocks: x = LN(x + attn(x)); x = LN(x + ffn(x)),
// with bidirectional attention inside each sequence and an exact (erf) GELU in the
// FFN. It keeps no state per sequence and has no output matrix: a step gives the
// last layer's hidden states (StepOutput::Hidden), which engine/embedder.h pools.
//
// Checkpoints are BertModel's (sentence-transformers' layout: no prefix) or carry
// "bert." before every name; the pooler (BertModel's pooler_output, which no
// sentence-transformers pooling reads) is left out. Every token has token type 0
// (one text per input, as sentence-transformers encodes it).
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/models/config_fields.h"
#include "corvid/models/families.h"
#include "corvid/models/layers/output.h"
#include "corvid/models/layers/scratch.h"

namespace corvid {

namespace {

ConfigDefaults bert_defaults(const std::string&) {
  ConfigDefaults d;  // transformers' BertConfig
  d.max_position_embeddings = 512;
  d.bos = {};
  d.eos = {};
  d.hidden_act = "gelu";
  return d;
}

std::string text_field(const nlohmann::json& j, const char* key, const char* fallback, const std::string& source) {
  const nlohmann::json* v = config_fields::find(j, key);
  if (!v) return fallback;
  CORVID_CHECK(v->is_string(), source, ": field ", key, " must be a string");
  return v->get<std::string>();
}

void configure_bert(ModelConfig& c, const FamilySource& src) {
  CORVID_CHECK(src.hf, src.path, ": BERT loads from a Hugging Face folder only");
  const nlohmann::json& j = *src.hf;
  CORVID_CHECK(c.hidden_act == "gelu", src.path, ": hidden_act ", c.hidden_act,
               " is not supported for bert (gelu only)");
  const std::string positions = text_field(j, "position_embedding_type", "absolute", src.path);
  CORVID_CHECK(positions == "absolute", src.path, ": position_embedding_type ", positions,
               " is not supported (absolute only)");
  CORVID_CHECK(!config_fields::boolean(j, "is_decoder", false, src.path), src.path,
               ": a BERT decoder (is_decoder) is not supported");
  c.rms_norm_eps = config_fields::number(j, "layer_norm_eps", 1e-12, src.path);  // the LayerNorms' eps
  CORVID_CHECK(c.rms_norm_eps > 0, src.path, ": layer_norm_eps must be positive");
}

struct LayerNormWeights {
  Tensor weight, bias;
};

class Bert final : public Model {
 public:
  Bert(const ModelConfig& config, const FamilySource& src, WeightLoader& w);

  const ModelConfig& config() const override { return config_; }
  Device device() const override { return device_; }
  const std::vector<LayerState>& state_spec() const override { return state_; }
  uint64_t buffers_generation() const override { return scratch_.generation; }
  int64_t weight_bytes_per_token() const override { return bytes_per_token_; }
  int64_t parameter_count() const override { return storage_.parameters; }
  void forward(const Step& step, const Tensor& out) override;

 private:
  struct Layer {
    Tensor q, k, v, o, q_bias, k_bias, v_bias, o_bias;
    LayerNormWeights attn_norm;
    Tensor up, up_bias, down, down_bias;
    LayerNormWeights ffn_norm;
  };

  LayerNormWeights layer_norm(WeightLoader& w, const std::string& prefix) const;
  void attention(const Layer& l, const Step& step, int64_t n);

  ModelConfig config_;
  Device device_;
  std::vector<LayerState> state_;  // none: an encoder keeps nothing per sequence
  layers::Scratch scratch_;
  WeightStorage storage_;
  int64_t bytes_per_token_ = 0;
  float eps_ = 1e-12f;
  Tensor word_, position_, token_type_;
  LayerNormWeights embed_norm_;
  std::vector<Layer> layers_;
  std::vector<int32_t> token_types_;  // [n] zeros: every token is of type 0
  std::vector<int32_t> extent_;       // per token: the last position of its sequence (what it attends to)
};

LayerNormWeights Bert::layer_norm(WeightLoader& w, const std::string& prefix) const {
  const int64_t H = config_.hidden_size;
  return {w.get(prefix + "LayerNorm.weight", {H}, WeightRole::Norm), w.get(prefix + "LayerNorm.bias", {H}, WeightRole::Bias)};
}

Bert::Bert(const ModelConfig& config, const FamilySource& src, WeightLoader& w)
    : config_(config), device_(w.device()), eps_(static_cast<float>(config.rms_norm_eps)) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t types = src.hf ? config_fields::integer(*src.hf, "type_vocab_size", src.path).value_or(2) : 2;
  CORVID_CHECK(types >= 1, src.path, ": type_vocab_size must be positive");
  const std::string p = w.has("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  word_ = w.get(p + "embeddings.word_embeddings.weight", {c.vocab_size, H}, WeightRole::Embedding);
  position_ = w.get(p + "embeddings.position_embeddings.weight", {c.max_position_embeddings, H}, WeightRole::Embedding);
  token_type_ = w.get(p + "embeddings.token_type_embeddings.weight", {types, H}, WeightRole::Embedding);
  embed_norm_ = layer_norm(w, p + "embeddings.");
  w.ignore(p + "pooler.dense.weight");
  w.ignore(p + "pooler.dense.bias");
  auto bias = [&](const std::string& name, int64_t size) { return w.get(name, {size}, WeightRole::Bias); };
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    Layer layer;
    layer.q = w.get(l + "attention.self.query.weight", {H, H});
    layer.q_bias = bias(l + "attention.self.query.bias", H);
    layer.k = w.get(l + "attention.self.key.weight", {H, H});
    layer.k_bias = bias(l + "attention.self.key.bias", H);
    layer.v = w.get(l + "attention.self.value.weight", {H, H});
    layer.v_bias = bias(l + "attention.self.value.bias", H);
    layer.o = w.get(l + "attention.output.dense.weight", {H, H});
    layer.o_bias = bias(l + "attention.output.dense.bias", H);
    layer.attn_norm = layer_norm(w, l + "attention.output.");
    layer.up = w.get(l + "intermediate.dense.weight", {I, H});
    layer.up_bias = bias(l + "intermediate.dense.bias", I);
    layer.down = w.get(l + "output.dense.weight", {H, I});
    layer.down_bias = bias(l + "output.dense.bias", H);
    layer.ffn_norm = layer_norm(w, l + "output.");
    bytes_per_token_ += layers::weight_bytes({&layer.q, &layer.k, &layer.v, &layer.o, &layer.up, &layer.down});
    layers_.push_back(std::move(layer));
  }
  storage_ = w.finish();
  scratch_.device = device_;
  scratch_.dims = {H, H, H, I};
}

// Each sequence's queries over its own keys and values: the causal attention op with
// every query placed at the sequence's last position sees all of them.
void Bert::attention(const Layer& l, const Step& step, int64_t n) {
  const int64_t heads = config_.num_attention_heads, D = config_.head_dim, H = config_.hidden_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Tensor x = scratch_.x.rows(n);
  const Tensor q = scratch_.q.rows(n), k = scratch_.k.rows(n), v = scratch_.v.rows(n);
  ops::matmul(x, l.q, q, &l.q_bias);
  ops::matmul(x, l.k, k, &l.k_bias);
  ops::matmul(x, l.v, v, &l.v_bias);
  const Tensor attn = scratch_.attn.rows(n);
  const std::span<const int64_t> starts = step.sequence_starts;
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    const int64_t a = starts[s], len = starts[s + 1] - a;
    auto heads_of = [&](const Tensor& t) {
      return Tensor(DType::F32, {len, heads, D}, t.row(a), t.device);
    };
    const ops::Indices last(std::span<const int32_t>(extent_.data() + a, static_cast<size_t>(len)));
    ops::attention(heads_of(q), heads_of(k), heads_of(v), last, scale, 0, heads_of(attn));
  }
  const Tensor h = scratch_.h.rows(n);
  ops::matmul(attn.reshaped({n, H}), l.o, h, &l.o_bias);
}

void Bert::forward(const Step& step, const Tensor& out) {
  CORVID_CHECK(step.output == StepOutput::Hidden, config_.architecture,
               " is an encoder: it gives hidden states (embeddings), not logits");
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const std::span<const int64_t> starts = step.sequence_starts;
  CORVID_CHECK(!starts.empty() && starts.front() == 0 && starts.back() == n, "bert: the step's ", starts.size(),
               " sequence starts do not cover its ", n, " tokens");
  scratch_.ensure(n);
  token_types_.assign(static_cast<size_t>(n), 0);
  extent_.resize(static_cast<size_t>(n));
  for (size_t s = 0; s + 1 < starts.size(); ++s)
    for (int64_t i = starts[s]; i < starts[s + 1]; ++i) extent_[static_cast<size_t>(i)] = static_cast<int32_t>(starts[s + 1] - starts[s] - 1);
  const Tensor x = scratch_.x.rows(n), h = scratch_.h.rows(n);
  // (word + token type) + position, in transformers' order, then the LayerNorm.
  ops::embedding(word_, step.tokens, x);
  ops::embedding(token_type_, ops::Indices(token_types_), h);
  ops::add(x, h);
  ops::embedding(position_, step.positions, h);
  ops::add(x, h);
  ops::layer_norm(x, embed_norm_.weight, embed_norm_.bias, eps_, x);
  for (const Layer& l : layers_) {
    attention(l, step, n);
    ops::add(x, h);
    ops::layer_norm(x, l.attn_norm.weight, l.attn_norm.bias, eps_, x);
    const Tensor up = scratch_.up.rows(n);
    ops::matmul(x, l.up, up, &l.up_bias);
    ops::gelu(up);
    ops::matmul(up, l.down, h, &l.down_bias);
    ops::add(x, h);
    ops::layer_norm(x, l.ffn_norm.weight, l.ffn_norm.bias, eps_, x);
  }
  const int64_t H = config_.hidden_size;
  CORVID_CHECK(out.rows() == static_cast<int64_t>(step.out_rows.size()) && out.cols() == H,
               "bert: hidden states must be [", step.out_rows.size(), ", ", H, "], got ", out.shape_str());
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
  bool all = static_cast<int64_t>(step.out_rows.size()) == n;
  for (size_t i = 0; all && i < step.out_rows.size(); ++i) all = step.out_rows[i] == static_cast<int64_t>(i);
  if (all) {
    copy_bytes(out.data, out.device, x.data, x.device, row_bytes * static_cast<size_t>(n));
    return;
  }
  for (size_t i = 0; i < step.out_rows.size(); ++i)
    copy_bytes(out.row(static_cast<int64_t>(i)), out.device, x.row(step.out_rows[i]), x.device, row_bytes);
}

}  // namespace

Family bert_family() {
  return {"bert", {"bert"}, {}, bert_defaults, configure_bert, {},
          [](const ModelConfig& c, const FamilySource& src, WeightLoader& w) -> std::unique_ptr<Model> {
            return std::make_unique<Bert>(c, src, w);
          },
          "sentence-transformers on all-MiniLM-L6-v2 (cosine >= 0.9999) and transformers' BertModel on a tiny "
          "random-weight fixture (hidden states within 1e-4)"};
}

}  // namespace corvid
