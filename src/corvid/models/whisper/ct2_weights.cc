#include "corvid/models/whisper/ct2_weights.h"

#include <cstring>

#include "corvid/core/buffer.h"
#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid {
namespace {

class Mapper {
 public:
  Mapper(std::shared_ptr<const Ct2File> file, WeightSet& out) : f_(*file), out_(out) {
    out_.owners.push_back(file);
    out_.source = file->path();
  }

  const Ct2Variable& var(const std::string& name, std::vector<int64_t> shape) const {
    const Ct2Variable* v = f_.find(name);
    CORVID_CHECK(v, f_.path(), ": missing variable ", name);
    CORVID_CHECK(v->shape == shape, f_.path(), ": variable ", name, " has an unexpected shape");
    CORVID_CHECK(v->dtype_id == 0 || v->dtype_id == 4 || v->dtype_id == 5, f_.path(), ": variable ", name,
                 " is quantized or not a float (CTranslate2 dtype ", v->dtype_id,
                 "); convert the model with --quantization float16 or float32");
    return *v;
  }
  // The tensor as stored (a matrix or an embedding table).
  void same(const std::string& hf, const std::string& ct2, std::vector<int64_t> shape) {
    out_.tensors[hf] = var(ct2, shape).view;
  }
  // Rows [first, first + rows) of a stored matrix [*, cols].
  void rows(const std::string& hf, const std::string& ct2, std::vector<int64_t> shape, int64_t first, int64_t rows) {
    const Tensor& t = var(ct2, shape).view;
    out_.tensors[hf] = Tensor(t.dtype, {rows, t.cols()}, t.row(first), t.device);
  }
  // Elements [first, first + size) of a stored vector, as F32.
  void vector(const std::string& hf, const std::string& ct2, int64_t total, int64_t first, int64_t size) {
    const Tensor& t = var(ct2, {total}).view;
    auto storage = std::make_shared<Buffer>(static_cast<size_t>(size) * sizeof(float));
    const char* src = static_cast<const char*>(t.data) + bytes_for(t.dtype, first);
    ops::dequantize_row(t.dtype, src, static_cast<float*>(storage->data()), size);
    out_.tensors[hf] = Tensor(DType::F32, {size}, storage->data());
    out_.owners.push_back(storage);
  }
  void layer_norm(const std::string& hf, const std::string& ct2, int64_t d) {
    vector(hf + ".weight", ct2 + "/gamma", d, 0, d);
    vector(hf + ".bias", ct2 + "/beta", d, 0, d);
  }
  void linear(const std::string& hf, const std::string& ct2, int64_t out, int64_t in) {
    same(hf + ".weight", ct2 + "/weight", {out, in});
    vector(hf + ".bias", ct2 + "/bias", out, 0, out);
  }
  void ffn(const std::string& hf, const std::string& ct2, int64_t d, int64_t ffn) {
    layer_norm(hf + "final_layer_norm", ct2 + "ffn/layer_norm", d);
    linear(hf + "fc1", ct2 + "ffn/linear_0", ffn, d);
    linear(hf + "fc2", ct2 + "ffn/linear_1", d, ffn);
  }
  // Self-attention: linear_0 holds q|k|v [3d, d], linear_1 the output projection.
  void self_attention(const std::string& hf, const std::string& ct2, int64_t d) {
    const std::string qkv = ct2 + "self_attention/linear_0/";
    const char* names[3] = {"q_proj", "k_proj", "v_proj"};
    for (int64_t p = 0; p < 3; ++p) {
      rows(hf + "self_attn." + names[p] + ".weight", qkv + "weight", {3 * d, d}, p * d, d);
      if (p != 1) vector(hf + "self_attn." + names[p] + ".bias", qkv + "bias", 3 * d, p * d, d);
    }
    linear(hf + "self_attn.out_proj", ct2 + "self_attention/linear_1", d, d);
    layer_norm(hf + "self_attn_layer_norm", ct2 + "self_attention/layer_norm", d);
  }
  // Cross-attention: linear_0 is q, linear_1 holds k|v [2d, d], linear_2 the output.
  void cross_attention(const std::string& hf, const std::string& ct2, int64_t d) {
    const std::string a = ct2 + "attention/";
    linear(hf + "encoder_attn.q_proj", a + "linear_0", d, d);
    rows(hf + "encoder_attn.k_proj.weight", a + "linear_1/weight", {2 * d, d}, 0, d);
    rows(hf + "encoder_attn.v_proj.weight", a + "linear_1/weight", {2 * d, d}, d, d);
    vector(hf + "encoder_attn.v_proj.bias", a + "linear_1/bias", 2 * d, d, d);
    linear(hf + "encoder_attn.out_proj", a + "linear_2", d, d);
    layer_norm(hf + "encoder_attn_layer_norm", a + "layer_norm", d);
  }

 private:
  const Ct2File& f_;
  WeightSet& out_;
};

}  // namespace

WeightSet whisper_weights_from_ct2(std::shared_ptr<const Ct2File> file, const WhisperConfig& c) {
  WeightSet w;
  Mapper m(file, w);
  const int64_t d = c.d_model;
  m.same("model.encoder.conv1.weight", "encoder/conv1/weight", {d, c.n_mels, 3});
  m.vector("model.encoder.conv1.bias", "encoder/conv1/bias", d, 0, d);
  m.same("model.encoder.conv2.weight", "encoder/conv2/weight", {d, d, 3});
  m.vector("model.encoder.conv2.bias", "encoder/conv2/bias", d, 0, d);
  m.same("model.encoder.embed_positions.weight", "encoder/position_encodings/encodings", {c.audio_positions, d});
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string hf = "model.encoder.layers." + std::to_string(i) + ".";
    const std::string ct2 = "encoder/layer_" + std::to_string(i) + "/";
    m.self_attention(hf, ct2, d);
    m.ffn(hf, ct2, d, c.encoder_ffn);
  }
  m.layer_norm("model.encoder.layer_norm", "encoder/layer_norm", d);
  m.same("model.decoder.embed_tokens.weight", "decoder/embeddings/weight", {c.vocab_size, d});
  m.same("model.decoder.embed_positions.weight", "decoder/position_encodings/encodings", {c.text_positions, d});
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string hf = "model.decoder.layers." + std::to_string(i) + ".";
    const std::string ct2 = "decoder/layer_" + std::to_string(i) + "/";
    m.self_attention(hf, ct2, d);
    m.cross_attention(hf, ct2, d);
    m.ffn(hf, ct2, d, c.decoder_ffn);
  }
  m.layer_norm("model.decoder.layer_norm", "decoder/layer_norm", d);
  // decoder/projection is an alias of the embeddings (a tied output) in every
  // converted Whisper; an untied one is its own matrix.
  const auto alias = file->aliases().find("decoder/projection/weight");
  if (alias == file->aliases().end() || alias->second != "decoder/embeddings/weight")
    m.same("proj_out.weight", "decoder/projection/weight", {c.vocab_size, d});
  return w;
}

}  // namespace corvid
