#include "corvid/models/whisper/whisper_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/core/thread_pool.h"
#include "corvid/models/whisper/heads_view.h"
#include "corvid/ops/ops.h"
#ifdef CORVID_HAVE_CUDA
#include "corvid/ops/cuda/mel_spectrogram.h"
#endif

namespace corvid {

namespace {

// A pool layer's storage [rows, heads, head_dim] as the matrix [rows, d].
Tensor as_rows(const Tensor& t) { return Tensor(t.dtype, {t.dim(0), t.dim(1) * t.dim(2)}, t.data, t.device); }

}  // namespace

EncodedAudio::~EncodedAudio() {
  if (pool)
    for (int32_t b : blocks) pool->release_cross(b);
}

WhisperSequence::~WhisperSequence() { release(); }

void WhisperSequence::release() {
  if (pool)
    for (int32_t b : blocks) pool->release_self(b);
  blocks.clear();
  length = 0;
}

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

WhisperModel::WhisperModel(const WhisperConfig& config, WeightLoader& w, const WhisperCapacity& capacity)
    : config_((config.validate(w.source()), config)),
      device_(w.device()),
      eps_(static_cast<float>(config.layer_norm_eps)),
      log_mel_(static_cast<int>(config.n_mels)) {
  const WhisperConfig& c = config_;
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
#ifdef CORVID_HAVE_CUDA
  if (device_ == Device::CUDA) log_mel_device_ = std::make_unique<ops::cuda::CudaMelPower>(log_mel_);
#endif
  enc_.device = dec_.device = device_;
  enc_.dims = {d, d, d, c.encoder_ffn};
  dec_.dims = {d, d, d, c.decoder_ffn};
  all_last_.assign(static_cast<size_t>(c.audio_positions), static_cast<int32_t>(c.audio_positions - 1));
  frame_ids_.resize(static_cast<size_t>(c.audio_positions));
  for (size_t i = 0; i < frame_ids_.size(); ++i) frame_ids_[i] = static_cast<int32_t>(i);
  pool_ = std::make_shared<WhisperKvPool>(c, capacity, device_);
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

std::unique_ptr<WhisperSequence> WhisperModel::start(std::shared_ptr<const EncodedAudio> audio, int64_t window) const {
  CORVID_CHECK(audio && window >= 0 && window < audio->windows, "whisper: window ", window, " of an audio of ",
               audio ? audio->windows : 0);
  auto s = std::make_unique<WhisperSequence>();
  s->audio = std::move(audio);
  s->window = window;
  s->pool = pool_;
  return s;
}

void WhisperModel::copy(const WhisperSequence& from, WhisperSequence& to) const {
  CORVID_CHECK(from.pool == pool_ && (to.pool == pool_ || !to.pool), "whisper: copying between hypotheses of different models");
  if (&from == &to) return;
  to.release();
  to.pool = pool_;
  to.audio = from.audio;
  to.window = from.window;
  to.length = from.length;
  for (int32_t b : from.blocks) pool_->share_self(b);
  to.blocks = from.blocks;
}

void WhisperModel::claim_blocks(WhisperSequence& seq, int64_t count, std::vector<int32_t>& copy_from,
                                std::vector<int32_t>& copy_to) const {
  constexpr int64_t bs = WhisperKvPool::kSelfBlock;
  const int64_t last = (seq.length + count - 1) / bs;  // the block of the step's last position
  for (int64_t b = seq.length / bs; b <= last; ++b) {
    if (b >= static_cast<int64_t>(seq.blocks.size())) {
      seq.blocks.push_back(pool_->take_self());
      continue;
    }
    int32_t& block = seq.blocks[static_cast<size_t>(b)];
    if (!pool_->self_shared(block)) continue;
    // Written into while another hypothesis holds it: this one's own copy of the rows so far.
    const int32_t mine = pool_->take_self();
    for (int64_t r = 0; r < seq.length - b * bs; ++r) {
      copy_from.push_back(static_cast<int32_t>(block * bs + r));
      copy_to.push_back(static_cast<int32_t>(mine * bs + r));
    }
    pool_->release_self(block);
    block = mine;
  }
}

std::vector<ops::Indices> WhisperModel::stage(const std::vector<std::vector<int32_t>>& arrays) {
  step_indices_.clear();
  std::vector<size_t> offsets;
  for (const std::vector<int32_t>& a : arrays) {
    offsets.push_back(step_indices_.size());
    step_indices_.insert(step_indices_.end(), a.begin(), a.end());
  }
  const int32_t* dev = nullptr;
  if (device_ != Device::CPU && !step_indices_.empty()) {
    if (step_indices_.size() > step_indices_capacity_) {
      step_indices_capacity_ = std::max<size_t>(step_indices_.size() * 2, 1024);
      step_indices_device_ = DeviceBuffer(device_, step_indices_capacity_ * sizeof(int32_t));
      ++buffers_generation_;
    }
    copy_bytes(step_indices_device_.data(), device_, step_indices_.data(), Device::CPU,
               step_indices_.size() * sizeof(int32_t));
    dev = static_cast<const int32_t*>(step_indices_device_.data());
  }
  std::vector<ops::Indices> out;
  for (size_t i = 0; i < arrays.size(); ++i)
    out.emplace_back(std::span<const int32_t>(step_indices_.data() + offsets[i], arrays[i].size()),
                     dev ? dev + offsets[i] : nullptr);
  return out;
}

void WhisperModel::check_step(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                              std::span<const int64_t> want) const {
  const WhisperConfig& c = config_;
  CORVID_CHECK(seqs.size() == tokens.size() && !seqs.empty(), "whisper: decode needs one token list per hypothesis");
  int64_t n = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const WhisperSequence& seq = *seqs[s];
    CORVID_CHECK(seq.pool == pool_ && seq.audio && seq.audio->pool == pool_,
                 "whisper: a hypothesis that is not this model's (start() makes them)");
    CORVID_CHECK(!tokens[s].empty(), "whisper: a hypothesis appends no token");
    CORVID_CHECK(seq.length + static_cast<int64_t>(tokens[s].size()) <= c.text_positions, "whisper: ",
                 seq.length + static_cast<int64_t>(tokens[s].size()), " tokens exceed the decoder's ",
                 c.text_positions, " positions");
    for (int32_t t : tokens[s])
      CORVID_CHECK(t >= 0 && t < c.vocab_size, "whisper: token ", t, " is outside the vocabulary");
    n += static_cast<int64_t>(tokens[s].size());
  }
  for (int64_t r : want) CORVID_CHECK(r >= 0 && r < n, "whisper: logits of row ", r, " of a ", n, "-token step");
}

void WhisperModel::decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                          std::span<const int64_t> want, std::vector<float>& logits) {
  decode(seqs, tokens, want, logits, nullptr);
}

void WhisperModel::decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                          std::span<const int64_t> want, std::vector<float>& logits, CrossQueries* cross) {
  const WhisperConfig& c = config_;
  const int64_t d = c.d_model, heads = c.decoder_heads, D = c.decoder_head_dim(), T = c.audio_positions;
  constexpr int64_t bs = WhisperKvPool::kSelfBlock;
  // Every check before any block changes hands: a refused step changes nothing.
  check_step(seqs, tokens, want);
  int64_t n = 0;
  for (const std::vector<int32_t>& t : tokens) n += static_cast<int64_t>(t.size());

  std::vector<int32_t> copy_from, copy_to;
  try {
    for (size_t s = 0; s < seqs.size(); ++s)
      claim_blocks(*seqs[s], static_cast<int64_t>(tokens[s].size()), copy_from, copy_to);
  } catch (...) {
    // The pool ran out part way: the copies already promised still happen, so that every
    // hypothesis reads what it wrote; the step itself does not run.
    const std::vector<ops::Indices> rows = stage({copy_from, copy_to});
    copy_self_rows(rows[0], rows[1]);
    throw;
  }
  // A step of one new token per hypothesis, every row's logits wanted (greedy, beam
  // search and sampling after the prompt) replays a recording per hypothesis count, with
  // the block tables at their full width; any other step runs op by op.
  const int64_t m = static_cast<int64_t>(want.size());
  bool recorded = record_steps_ && cross == nullptr && m == n && n == static_cast<int64_t>(seqs.size()) &&
                  n <= kMaxRecordedRows && device_backend(device_).supports_capture();
  for (int64_t i = 0; recorded && i < m; ++i) recorded = want[static_cast<size_t>(i)] == i;
  size_t width = 1;
  for (WhisperSequence* seq : seqs) width = std::max(width, seq->blocks.size());
  if (recorded) width = static_cast<size_t>(pool_->blocks_per_hypothesis());
  // The step's index arrays, in the order stage() hands them back (the copies last: the
  // others' offsets, which a recording holds, depend on the step's shape alone).
  enum { kIds, kPositions, kQuerySeq, kRows, kSelfTables, kCrossTables, kCrossPositions, kWant, kCopyFrom, kCopyTo };
  std::vector<std::vector<int32_t>> arrays(kCopyTo + 1);
  arrays[kSelfTables].assign(seqs.size() * width, 0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const WhisperSequence& seq = *seqs[s];
    for (size_t i = 0; i < tokens[s].size(); ++i) {
      const int64_t p = seq.length + static_cast<int64_t>(i);
      arrays[kIds].push_back(tokens[s][i]);
      arrays[kPositions].push_back(static_cast<int32_t>(p));
      arrays[kQuerySeq].push_back(static_cast<int32_t>(s));
      arrays[kRows].push_back(static_cast<int32_t>(seq.blocks[static_cast<size_t>(p / bs)] * bs + p % bs));
      arrays[kCrossPositions].push_back(static_cast<int32_t>(T - 1));
    }
    std::copy(seq.blocks.begin(), seq.blocks.end(), arrays[kSelfTables].begin() + static_cast<ptrdiff_t>(s * width));
    arrays[kCrossTables].push_back(seq.audio->blocks[static_cast<size_t>(seq.window)]);
  }
  for (int64_t r : want) arrays[kWant].push_back(static_cast<int32_t>(r));
  arrays[kCopyFrom] = std::move(copy_from);
  arrays[kCopyTo] = std::move(copy_to);
  const std::vector<ops::Indices> idx = stage(arrays);
  copy_self_rows(idx[kCopyFrom], idx[kCopyTo]);

  // Every buffer the step writes, at its size before it runs (nothing grows while recording).
  dec_.ensure(n);
  if (m > 0 && (picked_.tensor.rows() < m || !picked_.tensor.data)) {
    picked_ = DeviceTensor(device_, DType::F32, {std::max<int64_t>(m, 8), d});
    logits_ = DeviceTensor(device_, DType::F32, {std::max<int64_t>(m, 8), c.vocab_size});
    ++buffers_generation_;
  }
  auto run = [&] {
    const Tensor x = dec_.x.rows(n), h = dec_.h.rows(n);
    ops::embedding(embed_tokens_, idx[kIds], x);
    ops::embedding(decoder_positions_, idx[kPositions], h);
    ops::add(x, h);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const ops::PagedKV self_kv{bs, idx[kSelfTables], static_cast<int64_t>(width), idx[kQuerySeq]};
    const ops::PagedKV cross_kv{T, idx[kCrossTables], 1, idx[kQuerySeq]};
    for (size_t li = 0; li < decoder_.size(); ++li) {
      const DecoderLayer& l = decoder_[li];
      const int64_t layer = static_cast<int64_t>(li);
      const Tensor q = dec_.q.rows(n), k = dec_.k.rows(n), v = dec_.v.rows(n), attn = dec_.attn.rows(n);
      const Tensor q3 = heads_view(q, 0, n, heads, D), attn3 = heads_view(attn, 0, n, heads, D);
      layer_norm(l.self.norm, x, h);
      apply(l.self.q, h, q);
      apply(l.self.k, h, k);
      apply(l.self.v, h, v);
      const BlockPool& self = pool_->self();
      ops::store_kv(heads_view(k, 0, n, heads, D), heads_view(v, 0, n, heads, D), idx[kRows], self.keys(layer),
                    self.values(layer));
      ops::paged_attention(q3, self.keys(layer), self.values(layer), self_kv, idx[kPositions], scale, 0, attn3);
      apply(l.self.o, attn, h);
      ops::add(x, h);
      layer_norm(l.cross.norm, x, h);
      apply(l.cross.q, h, q);
      if (cross && cross->layers[li]) {
        cross->q[li].resize(static_cast<size_t>(n * d));
        copy_bytes(cross->q[li].data(), Device::CPU, q.data, device_, cross->q[li].size() * sizeof(float));
      }
      ops::paged_attention(q3, pool_->cross().keys(layer), pool_->cross().values(layer), cross_kv,
                           idx[kCrossPositions], scale, 0, attn3);
      apply(l.cross.o, attn, h);
      ops::add(x, h);
      run_mlp(l.mlp, x, dec_, n);
    }
    if (m == 0) return;
    // Logits of the wanted rows only: gather them, normalise, project.
    const Tensor picked = picked_.rows(m), out = logits_.rows(m);
    ops::embedding(x, idx[kWant], picked);
    layer_norm(decoder_norm_, picked, picked);
    ops::matmul(picked, output_, out);
  };
  if (recorded) run_recorded(n, run);
  else run();
  for (size_t s = 0; s < seqs.size(); ++s) seqs[s]->length += static_cast<int64_t>(tokens[s].size());
  logits.assign(static_cast<size_t>(m * c.vocab_size), 0.0f);
  if (m > 0) copy_bytes(logits.data(), Device::CPU, logits_.tensor.data, device_, logits.size() * sizeof(float));
}

void WhisperModel::run_recorded(int64_t rows, const std::function<void()>& run) {
  DeviceBackend& backend = device_backend(device_);
  StepRecording& rec = recordings_[rows];
  const StepRecording want{-1, true, backend.layout_generation(), dec_.generation, buffers_generation_,
                           static_cast<int>(ops::quantized_matmul())};
  if (!rec.warm || !rec.same_buffers(want)) {
    // A new shape (or one whose buffers moved) runs op by op first: scratch, workspaces
    // and library state reach their sizes for it, so that recording it (next time)
    // allocates nothing.
    if (rec.id >= 0) backend.drop(rec.id);
    run();
    rec = want;
    return;
  }
  if (rec.id < 0) {
    backend.begin_capture();
    try {
      run();
    } catch (const Error& e) {
      backend.abort_capture();
      // Recording is off from now on (it cannot be had here); the step runs op by op.
      std::fprintf(stderr, "corvid: recording a Whisper decoder step failed (%s); steps run op by op\n", e.what());
      record_steps_ = false;
      run();
      return;
    }
    rec.id = backend.end_capture();
  }
  backend.replay(rec.id);
  ++replayed_steps_;
}

WhisperModel::~WhisperModel() {
  if (device_ == Device::CPU) return;
  DeviceBackend& backend = device_backend(device_);
  for (const auto& [rows, rec] : recordings_)
    if (rec.id >= 0) backend.drop(rec.id);
}

// Copy on write's device work: self-attention rows from[i] → to[i] of every layer,
// gathered into copy_rows_ and stored back.
void WhisperModel::copy_self_rows(const ops::Indices& from, const ops::Indices& to) {
  const int64_t m = static_cast<int64_t>(from.size());
  if (m == 0) return;
  const WhisperConfig& c = config_;
  const int64_t d = c.d_model, heads = c.decoder_heads, D = c.decoder_head_dim();
  if (copy_rows_.tensor.rows() < 2 * m || !copy_rows_.tensor.data)
    copy_rows_ = DeviceTensor(device_, DType::F32, {std::max<int64_t>(2 * m, 64), d});
  const Tensor keys = copy_rows_.rows(m);
  const Tensor values(DType::F32, {m, d}, copy_rows_.tensor.row(m), device_);
  const BlockPool& self = pool_->self();
  for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
    ops::embedding(as_rows(self.keys(layer)), from, keys);
    ops::embedding(as_rows(self.values(layer)), from, values);
    ops::store_kv(heads_view(keys, 0, m, heads, D), heads_view(values, 0, m, heads, D), to, self.keys(layer),
                  self.values(layer));
  }
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
      const Tensor pool_keys = as_rows(pool_->cross().keys(layer));
      const void* from = pool_keys.row(int64_t{audio->blocks[static_cast<size_t>(window)]} * T);
      if (pool_keys.dtype == DType::F32) {
        copy_bytes(keys.data(), Device::CPU, from, device_, keys.size() * sizeof(float));
      } else {  // F16 (the GPU's pools)
        std::vector<uint16_t> half(keys.size());
        copy_bytes(half.data(), Device::CPU, from, device_, half.size() * sizeof(uint16_t));
        for (size_t i = 0; i < half.size(); ++i) keys[i] = f16_to_f32(half[i]);
      }
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
