#include "corvid/models/whisper/whisper_model.h"

#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/ops.h"

namespace corvid {

namespace {

Tensor heads_view(const Tensor& t, int64_t row, int64_t rows, int64_t heads, int64_t head_dim) {
  return Tensor(DType::F32, {rows, heads, head_dim}, t.row(row), t.device);
}

}  // namespace

WhisperModel::Norm WhisperModel::norm(WeightLoader& w, const std::string& name) const {
  return {w.get(name + ".weight", {config_.d_model}, WeightRole::Norm),
          w.get(name + ".bias", {config_.d_model}, WeightRole::Bias)};
}

WhisperModel::Linear WhisperModel::linear(WeightLoader& w, const std::string& name, int64_t out, int64_t in,
                                          bool bias) const {
  Linear l;
  l.weight = w.get(name + ".weight", {out, in});
  if (bias) l.bias = w.get(name + ".bias", {out}, WeightRole::Bias);
  return l;
}

WhisperModel::Attention WhisperModel::attention(WeightLoader& w, const std::string& name) const {
  const int64_t d = config_.d_model;
  Attention a;
  a.q = linear(w, name + ".q_proj", d, d);
  a.k = linear(w, name + ".k_proj", d, d, /*bias=*/false);  // Whisper's keys have no bias
  a.v = linear(w, name + ".v_proj", d, d);
  a.o = linear(w, name + ".out_proj", d, d);
  return a;
}

WhisperModel::Mlp WhisperModel::mlp(WeightLoader& w, const std::string& prefix, int64_t ffn) const {
  const int64_t d = config_.d_model;
  Mlp m;
  m.norm = norm(w, prefix + "final_layer_norm");
  m.fc1 = linear(w, prefix + "fc1", ffn, d);
  m.fc2 = linear(w, prefix + "fc2", d, ffn);
  return m;
}

WhisperModel::WhisperModel(const WhisperConfig& config, WeightLoader& w)
    : config_(config), device_(w.device()), eps_(static_cast<float>(config.layer_norm_eps)) {
  const WhisperConfig& c = config_;
  c.validate(w.source());
  const int64_t d = c.d_model;
  CORVID_CHECK(std::max(c.encoder_head_dim(), c.decoder_head_dim()) <= ops::max_attention_head_dim(device_),
               w.source(), ": attention heads of ", std::max(c.encoder_head_dim(), c.decoder_head_dim()),
               " dims are wider than this backend runs");
  // A conv1d weight [C_out, C_in, kernel] is the matrix [C_out, C_in * kernel] im2col_1d's patches multiply.
  conv1_.weight = w.get("model.encoder.conv1.weight", {d, c.n_mels, 3}).reshaped({d, c.n_mels * 3});
  conv1_.bias = w.get("model.encoder.conv1.bias", {d}, WeightRole::Bias);
  conv2_.weight = w.get("model.encoder.conv2.weight", {d, d, 3}).reshaped({d, d * 3});
  conv2_.bias = w.get("model.encoder.conv2.bias", {d}, WeightRole::Bias);
  encoder_positions_ = w.get("model.encoder.embed_positions.weight", {c.audio_positions, d}, WeightRole::Embedding);
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string p = "model.encoder.layers." + std::to_string(i) + ".";
    EncoderLayer l;
    l.self = attention(w, p + "self_attn");
    l.self.norm = norm(w, p + "self_attn_layer_norm");
    l.mlp = mlp(w, p, c.encoder_ffn);
    encoder_.push_back(std::move(l));
  }
  encoder_norm_ = norm(w, "model.encoder.layer_norm");
  embed_tokens_ = w.get("model.decoder.embed_tokens.weight", {c.vocab_size, d}, WeightRole::Embedding);
  decoder_positions_ = w.get("model.decoder.embed_positions.weight", {c.text_positions, d}, WeightRole::Embedding);
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    DecoderLayer l;
    l.self = attention(w, p + "self_attn");
    l.self.norm = norm(w, p + "self_attn_layer_norm");
    l.cross = attention(w, p + "encoder_attn");
    l.cross.norm = norm(w, p + "encoder_attn_layer_norm");
    l.mlp = mlp(w, p, c.decoder_ffn);
    decoder_.push_back(std::move(l));
  }
  decoder_norm_ = norm(w, "model.decoder.layer_norm");
  // The output matrix is the token embedding (tied) unless the checkpoint has its own.
  output_ = w.has("proj_out.weight") ? w.get("proj_out.weight", {c.vocab_size, d}) : embed_tokens_;
  storage_ = w.finish();
  if (device_ == Device::CPU) {  // after finish(): the weights' final addresses
    encoder_cpu_ = std::make_unique<EncoderCpu>();
    for (const Linear* lin : {&conv1_, &conv2_}) encoder_cpu_->add(lin->weight, lin->bias);
    for (const EncoderLayer& l : encoder_)
      for (const Linear* lin : {&l.self.q, &l.self.k, &l.self.v, &l.self.o, &l.mlp.fc1, &l.mlp.fc2})
        encoder_cpu_->add(lin->weight, lin->bias);
    for (const DecoderLayer& l : decoder_)
      for (const Linear* lin : {&l.cross.k, &l.cross.v}) encoder_cpu_->add(lin->weight, lin->bias);
  }
  enc_.device = dec_.device = device_;
  enc_.dims = {d, d, d, c.encoder_ffn};
  dec_.dims = {d, d, d, c.decoder_ffn};
  all_last_.assign(static_cast<size_t>(c.audio_positions), static_cast<int32_t>(c.audio_positions - 1));
  frame_ids_.resize(static_cast<size_t>(c.audio_positions));
  for (size_t i = 0; i < frame_ids_.size(); ++i) frame_ids_[i] = static_cast<int32_t>(i);
}

void WhisperModel::apply(const Linear& l, const Tensor& x, const Tensor& out, int64_t rows_per_window) const {
  if (rows_per_window > 0 && encoder_cpu_)
    return encoder_cpu_->linear(l.weight, x, out, rows_per_window, ThreadPool::global());
  ops::matmul(x, l.weight, out, l.bias.data ? &l.bias : nullptr);
}

void WhisperModel::layer_norm(const Norm& n, const Tensor& x, const Tensor& out) const {
  ops::layer_norm(x, n.weight, n.bias, eps_, out);
}

// x += fc2(gelu(fc1(LN(x)))), through s.h and s.up.
void WhisperModel::run_mlp(const Mlp& m, const Tensor& x, layers::Scratch& s, int64_t n, int64_t rows_per_window) const {
  const Tensor h = s.h.rows(n), up = layers::rows_of(s.up, n, m.fc1.weight.rows());
  layer_norm(m.norm, x, h);
  apply(m.fc1, h, up, rows_per_window);
  ops::gelu(up);
  apply(m.fc2, up, h, rows_per_window);
  ops::add(x, h);
}

std::shared_ptr<EncodedAudio> WhisperModel::encode(std::span<const float> features, int64_t windows,
                                                   bool keep_states) {
  const WhisperConfig& c = config_;
  const int64_t d = c.d_model, frames = c.input_frames(), T = c.audio_positions, mels = c.n_mels;
  CORVID_CHECK(windows >= 1 && static_cast<int64_t>(features.size()) == windows * mels * frames,
               "whisper: encode takes ", windows, " windows of [", mels, ", ", frames, "] features, got ",
               features.size(), " values");
  if (enc_windows_ < windows) {
    enc_windows_ = windows;
    mel_ = DeviceTensor(device_, DType::F32, {windows * frames, mels});
    patches1_ = DeviceTensor(device_, DType::F32, {windows * frames, mels * 3});
    conv_out_ = DeviceTensor(device_, DType::F32, {windows * frames, d});
    patches2_ = DeviceTensor(device_, DType::F32, {windows * T, d * 3});
  }
  const int64_t n = windows * T;
  enc_.ensure(n);
  // Time-major frames: the convolutions run as im2col patches times the weight matrix.
  std::vector<float> time_major(static_cast<size_t>(windows * frames * mels));
  for (int64_t w = 0; w < windows; ++w)
    for (int64_t m = 0; m < mels; ++m)
      for (int64_t t = 0; t < frames; ++t)
        time_major[static_cast<size_t>((w * frames + t) * mels + m)] = features[static_cast<size_t>((w * mels + m) * frames + t)];
  copy_bytes(mel_.tensor.data, device_, time_major.data(), Device::CPU, time_major.size() * sizeof(float));
  const Tensor p1 = patches1_.rows(windows * frames), c1 = conv_out_.rows(windows * frames), p2 = patches2_.rows(n);
  for (int64_t w = 0; w < windows; ++w) {
    const Tensor in(DType::F32, {frames, mels}, mel_.tensor.row(w * frames), device_);
    ops::im2col_1d(in, 3, 1, 1, Tensor(DType::F32, {frames, mels * 3}, p1.row(w * frames), device_));
  }
  apply(conv1_, p1, c1, frames);
  ops::gelu(c1);
  for (int64_t w = 0; w < windows; ++w) {
    const Tensor in(DType::F32, {frames, d}, c1.row(w * frames), device_);
    ops::im2col_1d(in, 3, 2, 1, Tensor(DType::F32, {T, d * 3}, p2.row(w * T), device_));
  }
  const Tensor x = enc_.x.rows(n), h = enc_.h.rows(n);
  apply(conv2_, p2, x, T);
  ops::gelu(x);
  // The positions as F32 rows (the table may be stored in 16 bits), added per window.
  const Tensor positions = enc_.h.rows(T);
  ops::embedding(encoder_positions_, ops::Indices(frame_ids_), positions);
  for (int64_t w = 0; w < windows; ++w) ops::add(Tensor(DType::F32, {T, d}, x.row(w * T), device_), positions);
  const int64_t heads = c.encoder_heads, D = c.encoder_head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const ops::Indices last(all_last_);
  for (const EncoderLayer& l : encoder_) {
    const Tensor q = enc_.q.rows(n), k = enc_.k.rows(n), v = enc_.v.rows(n), attn = enc_.attn.rows(n);
    layer_norm(l.self.norm, x, h);
    apply(l.self.q, h, q, T);
    apply(l.self.k, h, k, T);
    apply(l.self.v, h, v, T);
    for (int64_t w = 0; w < windows; ++w) {
      if (encoder_cpu_) {
        encoder_cpu_->attention(q, k, v, attn, w * T, T, heads, D, scale, ThreadPool::global());
      } else {
        ops::attention(heads_view(q, w * T, T, heads, D), heads_view(k, w * T, T, heads, D),
                       heads_view(v, w * T, T, heads, D), last, scale, 0, heads_view(attn, w * T, T, heads, D));
      }
    }
    apply(l.self.o, attn, h, T);
    ops::add(x, h);
    run_mlp(l.mlp, x, enc_, n, T);
  }
  auto out = std::make_shared<EncodedAudio>();
  out->windows = windows;
  out->states = DeviceTensor(device_, DType::F32, {n, d});
  layer_norm(encoder_norm_, x, out->states.tensor);
  for (const DecoderLayer& l : decoder_) {
    out->k.emplace_back(device_, DType::F32, std::initializer_list<int64_t>{n, d});
    out->v.emplace_back(device_, DType::F32, std::initializer_list<int64_t>{n, d});
    apply(l.cross.k, out->states.tensor, out->k.back().tensor, T);
    apply(l.cross.v, out->states.tensor, out->v.back().tensor, T);
  }
  if (!keep_states) out->states = DeviceTensor();
  return out;
}

std::unique_ptr<WhisperSequence> WhisperModel::start(std::shared_ptr<const EncodedAudio> audio, int64_t window) const {
  CORVID_CHECK(audio && window >= 0 && window < audio->windows, "whisper: window ", window, " of an audio of ",
               audio ? audio->windows : 0);
  auto s = std::make_unique<WhisperSequence>();
  s->audio = std::move(audio);
  s->window = window;
  for (int64_t i = 0; i < config_.decoder_layers; ++i) {
    s->k.emplace_back(device_, DType::F32, std::initializer_list<int64_t>{config_.text_positions, config_.d_model});
    s->v.emplace_back(device_, DType::F32, std::initializer_list<int64_t>{config_.text_positions, config_.d_model});
  }
  return s;
}

void WhisperModel::copy(const WhisperSequence& from, WhisperSequence& to) const {
  CORVID_CHECK(from.k.size() == to.k.size(), "whisper: copying between hypotheses of different models");
  to.audio = from.audio;
  to.window = from.window;
  to.length = from.length;
  const size_t bytes = static_cast<size_t>(from.length * config_.d_model) * sizeof(float);
  if (bytes == 0) return;
  for (size_t i = 0; i < from.k.size(); ++i) {
    copy_bytes(to.k[i].tensor.data, device_, from.k[i].tensor.data, device_, bytes);
    copy_bytes(to.v[i].tensor.data, device_, from.v[i].tensor.data, device_, bytes);
  }
}

void WhisperModel::decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                          std::span<const int64_t> want, std::vector<float>& logits) {
  decode(seqs, tokens, want, logits, nullptr);
}

void WhisperModel::decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                          std::span<const int64_t> want, std::vector<float>& logits, CrossQueries* cross) {
  const WhisperConfig& c = config_;
  const int64_t d = c.d_model, heads = c.decoder_heads, D = c.decoder_head_dim(), T = c.audio_positions;
  CORVID_CHECK(seqs.size() == tokens.size() && !seqs.empty(), "whisper: decode needs one token list per hypothesis");
  std::vector<int32_t> ids, positions;
  std::vector<int64_t> starts;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const WhisperSequence& seq = *seqs[s];
    CORVID_CHECK(!tokens[s].empty(), "whisper: a hypothesis appends no token");
    CORVID_CHECK(seq.length + static_cast<int64_t>(tokens[s].size()) <= c.text_positions, "whisper: ",
                 seq.length + tokens[s].size(), " tokens exceed the decoder's ", c.text_positions, " positions");
    starts.push_back(static_cast<int64_t>(ids.size()));
    for (size_t i = 0; i < tokens[s].size(); ++i) {
      CORVID_CHECK(tokens[s][i] >= 0 && tokens[s][i] < c.vocab_size, "whisper: token ", tokens[s][i],
                   " is outside the vocabulary");
      ids.push_back(tokens[s][i]);
      positions.push_back(static_cast<int32_t>(seq.length + static_cast<int64_t>(i)));
    }
  }
  starts.push_back(static_cast<int64_t>(ids.size()));
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t r : want) CORVID_CHECK(r >= 0 && r < n, "whisper: logits of row ", r, " of a ", n, "-token step");
  dec_.ensure(n);
  const Tensor x = dec_.x.rows(n), h = dec_.h.rows(n);
  ops::embedding(embed_tokens_, ops::Indices(ids), x);
  ops::embedding(decoder_positions_, ops::Indices(positions), h);
  ops::add(x, h);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (size_t li = 0; li < decoder_.size(); ++li) {
    const DecoderLayer& l = decoder_[li];
    const Tensor q = dec_.q.rows(n), k = dec_.k.rows(n), v = dec_.v.rows(n), attn = dec_.attn.rows(n);
    layer_norm(l.self.norm, x, h);
    apply(l.self.q, h, q);
    apply(l.self.k, h, k);
    apply(l.self.v, h, v);
    for (size_t s = 0; s < seqs.size(); ++s) {
      WhisperSequence& seq = *seqs[s];
      const int64_t a = starts[s], len = starts[s + 1] - a;
      const Tensor& kc = seq.k[li].tensor;
      const Tensor& vc = seq.v[li].tensor;
      copy_bytes(kc.row(seq.length), device_, k.row(a), device_, row_bytes * static_cast<size_t>(len));
      copy_bytes(vc.row(seq.length), device_, v.row(a), device_, row_bytes * static_cast<size_t>(len));
      const ops::Indices pos(std::span<const int32_t>(positions.data() + a, static_cast<size_t>(len)));
      ops::attention(heads_view(q, a, len, heads, D), heads_view(kc, 0, c.text_positions, heads, D),
                     heads_view(vc, 0, c.text_positions, heads, D), pos, scale, 0, heads_view(attn, a, len, heads, D));
    }
    apply(l.self.o, attn, h);
    ops::add(x, h);
    layer_norm(l.cross.norm, x, h);
    apply(l.cross.q, h, q);
    if (cross && cross->layers[li]) {
      cross->q[li].resize(static_cast<size_t>(n * d));
      copy_bytes(cross->q[li].data(), Device::CPU, q.data, device_, cross->q[li].size() * sizeof(float));
    }
    for (size_t s = 0; s < seqs.size(); ++s) {
      const WhisperSequence& seq = *seqs[s];
      const int64_t a = starts[s], len = starts[s + 1] - a;
      const Tensor& ck = seq.audio->k[li].tensor;
      const Tensor& cv = seq.audio->v[li].tensor;
      const ops::Indices pos(std::span<const int32_t>(all_last_.data(), static_cast<size_t>(len)));
      ops::attention(heads_view(q, a, len, heads, D), heads_view(ck, seq.window * T, T, heads, D),
                     heads_view(cv, seq.window * T, T, heads, D), pos, scale, 0, heads_view(attn, a, len, heads, D));
    }
    apply(l.cross.o, attn, h);
    ops::add(x, h);
    run_mlp(l.mlp, x, dec_, n);
  }
  for (size_t s = 0; s < seqs.size(); ++s) seqs[s]->length += starts[s + 1] - starts[s];
  // Logits of the wanted rows only: gather them, normalise, project.
  const int64_t m = static_cast<int64_t>(want.size());
  logits.assign(static_cast<size_t>(m * c.vocab_size), 0.0f);
  if (m == 0) return;
  if (picked_.tensor.rows() < m || !picked_.tensor.data) {
    picked_ = DeviceTensor(device_, DType::F32, {std::max<int64_t>(m, 8), d});
    logits_ = DeviceTensor(device_, DType::F32, {std::max<int64_t>(m, 8), c.vocab_size});
  }
  const Tensor picked = picked_.rows(m), out = logits_.rows(m);
  for (int64_t i = 0; i < m; ++i)
    copy_bytes(picked.row(i), device_, x.row(want[static_cast<size_t>(i)]), device_, row_bytes);
  layer_norm(decoder_norm_, picked, picked);
  ops::matmul(picked, output_, out);
  copy_bytes(logits.data(), Device::CPU, out.data, device_, logits.size() * sizeof(float));
}

std::vector<float> WhisperModel::cross_attention(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                                 const std::vector<int32_t>& tokens,
                                                 std::span<const std::pair<int, int>> heads, int64_t frames,
                                                 std::vector<float>& logits) {
  const WhisperConfig& c = config_;
  const int64_t d = c.d_model, D = c.decoder_head_dim(), T = c.audio_positions;
  const int64_t n = static_cast<int64_t>(tokens.size());
  CORVID_CHECK(frames >= 1 && frames <= T, "whisper: cross-attention over ", frames, " of ", T, " audio positions");
  CrossQueries cross;
  cross.layers.assign(static_cast<size_t>(c.decoder_layers), false);
  cross.q.resize(static_cast<size_t>(c.decoder_layers));
  for (const auto& [layer, head] : heads) {
    CORVID_CHECK(layer >= 0 && layer < c.decoder_layers && head >= 0 && head < c.decoder_heads,
                 "whisper: alignment head (", layer, ", ", head, ") is outside the decoder's ", c.decoder_layers,
                 " layers of ", c.decoder_heads, " heads");
    cross.layers[static_cast<size_t>(layer)] = true;
  }
  std::unique_ptr<WhisperSequence> seq = start(audio, window);
  std::vector<int64_t> every(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) every[static_cast<size_t>(i)] = i;
  WhisperSequence* one[] = {seq.get()};
  decode(one, std::span<const std::vector<int32_t>>(&tokens, 1), every, logits, &cross);

  // Scores from the host copies of the queries and of the window's keys: a few heads
  // over a few hundred tokens, small beside the step itself.
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> out(heads.size() * static_cast<size_t>(n * frames));
  std::vector<float> keys(static_cast<size_t>(frames * d));
  int last_layer = -1;
  for (size_t hi = 0; hi < heads.size(); ++hi) {
    const auto [layer, head] = heads[hi];
    if (layer != last_layer) {
      copy_bytes(keys.data(), Device::CPU, audio->k[static_cast<size_t>(layer)].tensor.row(window * T), device_,
                 keys.size() * sizeof(float));
      last_layer = layer;
    }
    const std::vector<float>& q = cross.q[static_cast<size_t>(layer)];
    for (int64_t t = 0; t < n; ++t) {
      float* row = out.data() + (hi * static_cast<size_t>(n) + static_cast<size_t>(t)) * static_cast<size_t>(frames);
      const float* qt = q.data() + t * d + head * D;
      float top = -INFINITY;
      for (int64_t f = 0; f < frames; ++f) {
        const float* kf = keys.data() + f * d + head * D;
        float dot = 0;
        for (int64_t i = 0; i < D; ++i) dot += qt[i] * kf[i];
        row[f] = dot * scale;
        top = std::max(top, row[f]);
      }
      double sum = 0;
      for (int64_t f = 0; f < frames; ++f) sum += row[f] = std::exp(row[f] - top);
      for (int64_t f = 0; f < frames; ++f) row[f] = static_cast<float>(row[f] / sum);
    }
  }
  return out;
}

}  // namespace corvid
