// WhisperModel's encoder side: the log-mel front end, and audio windows through the
// convolutions and encoder layers into their cross-attention keys and values.
#include <algorithm>
#include <cmath>

#include "corvid/core/error.h"
#include "corvid/core/thread_pool.h"
#include "corvid/models/whisper/heads_view.h"
#include "corvid/models/whisper/whisper_model.h"
#include "corvid/ops/ops.h"

namespace corvid {

std::vector<float> WhisperModel::spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames) {
  return log_mel_.spectrogram(samples, pad, frames, log_mel_device_.get());
}

std::shared_ptr<EncodedAudio> WhisperModel::encode(std::span<const float> features, int64_t windows,
                                                   bool keep_states) {
  const int64_t parts[] = {windows};
  return encode_parts(features, parts, keep_states).front();
}

std::vector<std::shared_ptr<EncodedAudio>> WhisperModel::encode_parts(std::span<const float> features,
                                                                      std::span<const int64_t> parts,
                                                                      bool keep_states) {
  const WhisperConfig& c = config_;
  int64_t windows = 0;
  for (int64_t p : parts) {
    CORVID_CHECK(p >= 1, "whisper: an encode part of ", p, " windows");
    windows += p;
  }
  const int64_t d = c.d_model, frames = c.input_frames(), T = c.audio_positions, mels = c.n_mels;
  CORVID_CHECK(windows >= 1 && static_cast<int64_t>(features.size()) == windows * mels * frames,
               "whisper: encode takes ", windows, " windows of [", mels, ", ", frames, "] features, got ",
               features.size(), " values");
  // The cross pool's blocks first: a spent pool refuses before any work.
  std::vector<std::shared_ptr<EncodedAudio>> out;
  for (int64_t p : parts) {
    auto audio = std::make_shared<EncodedAudio>();
    audio->pool = pool_;
    audio->windows = p;
    for (int64_t w = 0; w < p; ++w) audio->blocks.push_back(pool_->take_cross());
    out.push_back(std::move(audio));
  }
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
  // The final norm, then every window's cross-attention keys and values, one GEMM per
  // layer for all of them, stored into each window's block of the cross pool (in the
  // pool's element type).
  const Tensor states = enc_.h.rows(n);
  layer_norm(encoder_norm_, x, states);
  std::vector<int32_t> rows;
  rows.reserve(static_cast<size_t>(n));
  for (const std::shared_ptr<EncodedAudio>& audio : out)
    for (int32_t block : audio->blocks)
      for (int64_t i = 0; i < T; ++i) rows.push_back(static_cast<int32_t>(int64_t{block} * T + i));
  const ops::Indices pool_rows = stage({rows}).front();
  const int64_t dec_heads = c.decoder_heads, dec_D = c.decoder_head_dim();
  constexpr int64_t kStoreRows = 32768;  // store_kv's launch takes at most 65535 rows
  for (size_t li = 0; li < decoder_.size(); ++li) {
    const Tensor k = enc_.k.rows(n), v = enc_.v.rows(n);
    apply(decoder_[li].cross.k, states, k, T);
    apply(decoder_[li].cross.v, states, v, T);
    const BlockPool& cross_pool = pool_->cross();
    for (int64_t r = 0; r < n; r += kStoreRows) {
      const int64_t m = std::min(kStoreRows, n - r);
      ops::store_kv(heads_view(k, r, m, dec_heads, dec_D), heads_view(v, r, m, dec_heads, dec_D),
                    pool_rows.slice(static_cast<size_t>(r), static_cast<size_t>(m)),
                    cross_pool.keys(static_cast<int64_t>(li)), cross_pool.values(static_cast<int64_t>(li)));
    }
  }
  int64_t first = 0;
  for (const std::shared_ptr<EncodedAudio>& audio : out) {
    const int64_t p = audio->windows;
    if (keep_states) {
      audio->states = DeviceTensor(device_, DType::F32, {p * T, d});
      copy_bytes(audio->states.tensor.data, device_, states.row(first * T), device_,
                 static_cast<size_t>(p * T * d) * sizeof(float));
    }
    first += p;
  }
  return out;
}

}  // namespace corvid
