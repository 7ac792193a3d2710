// Whisper's encoder-decoder (openai/whisper; transformers' WhisperForConditionalGeneration):
// - encoder: log-mel [n_mels, 3000] of a 30-s window → conv1d(k3, p1) + GELU →
//   conv1d(k3, s2, p1) + GELU → + sinusoidal positions → pre-LN blocks (bidirectional
//   attention, exact-GELU MLP) → LayerNorm: [1500, d] per window;
// - per decoder layer, the cross-attention keys and values of those states, computed
//   once per window (EncodedAudio) and shared by every hypothesis decoding it;
// - decoder: token + learned position embeddings → pre-LN blocks (causal
//   self-attention over the hypothesis' own cache, cross-attention over its window,
//   MLP) → LayerNorm → logits through the tied embedding matrix.
// The model is driven by one thread at a time (it keeps its step buffers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "corvid/audio/log_mel.h"
#include "corvid/core/device.h"
#include "corvid/models/weight_loader.h"
#include "corvid/models/layers/scratch.h"
#include "corvid/models/whisper/encoder_cpu.h"
#include "corvid/models/whisper/whisper_config.h"
#include "corvid/models/whisper/whisper_kv_pool.h"
#include "corvid/models/whisper/whisper_steps.h"
#include "corvid/ops/indices.h"

namespace corvid {

// The encoder's work for `windows` windows: window w's cross-attention keys and values
// of every decoder layer are block blocks[w] of the model's cross pool (audio_positions
// rows), held until this is dropped; and, when asked for, the encoder's output states
// [windows * 1500, d].
struct EncodedAudio {
  int64_t windows = 0;
  std::vector<int32_t> blocks;
  DeviceTensor states;
  std::shared_ptr<WhisperKvPool> pool;
  EncodedAudio() = default;
  EncodedAudio(const EncodedAudio&) = delete;
  EncodedAudio& operator=(const EncodedAudio&) = delete;
  ~EncodedAudio();
};

// One hypothesis being decoded: its self-attention block table (WhisperKvPool) and the
// window it attends to. Dropping it returns its blocks.
struct WhisperSequence {
  std::shared_ptr<const EncodedAudio> audio;
  int64_t window = 0;
  int64_t length = 0;           // tokens in the cache
  std::vector<int32_t> blocks;  // entry b: positions [b * kSelfBlock, (b + 1) * kSelfBlock)
  std::shared_ptr<WhisperKvPool> pool;
  WhisperSequence() = default;
  WhisperSequence(const WhisperSequence&) = delete;
  WhisperSequence& operator=(const WhisperSequence&) = delete;
  ~WhisperSequence();
  void release();  // back to empty: its blocks returned
};

class WhisperModel final : public WhisperSteps {
 public:
  // The KV pools are sized for `capacity` (whisper_kv_pool.h) and allocated here.
  WhisperModel(const WhisperConfig& config, WeightLoader& weights, const WhisperCapacity& capacity = {});
  ~WhisperModel() override;
  WhisperModel(const WhisperModel&) = delete;
  WhisperModel& operator=(const WhisperModel&) = delete;

  const WhisperConfig& config() const override { return config_; }
  const WhisperCapacity& capacity() const override { return pool_->capacity(); }
  Device device() const { return device_; }
  int64_t parameter_count() const { return storage_.parameters; }

  // WhisperSteps, run on the calling thread. start(), copy() and dropping a hypothesis
  // are thread-safe (blocks change hands; no device work), and so is spectrogram() on
  // the CPU; the rest is one thread's.
  std::vector<float> spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames) override;
  std::shared_ptr<EncodedAudio> encode(std::span<const float> features, int64_t windows,
                                       bool keep_states = false) override;
  std::unique_ptr<WhisperSequence> start(std::shared_ptr<const EncodedAudio> audio, int64_t window) const override;
  void copy(const WhisperSequence& from, WhisperSequence& to) const override;
  void decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
              std::span<const int64_t> want, std::vector<float>& logits) override;
  std::vector<float> cross_attention(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                     const std::vector<int32_t>& tokens, std::span<const std::pair<int, int>> heads,
                                     int64_t frames, std::vector<float>& logits) override;

  // Several callers' windows in one pass: part i is parts[i] windows, back to back in
  // `features`; each part gets its own EncodedAudio (what running them one by one gives).
  std::vector<std::shared_ptr<EncodedAudio>> encode_parts(std::span<const float> features,
                                                          std::span<const int64_t> parts, bool keep_states = false);
  // decode()'s checks of one caller's part of a step, without running it: throws the
  // error decode() would (a batcher refuses one caller without failing the others).
  void check_step(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                  std::span<const int64_t> want) const;
  const WhisperKvPool& pool() const { return *pool_; }

  // Decoder steps of one token per hypothesis replay a recording (a CUDA graph) per
  // hypothesis count, up to kMaxRecordedRows, on a device that records work; off: every
  // step runs op by op (benchmarks compare the two).
  static constexpr int64_t kMaxRecordedRows = 256;
  void set_step_recording(bool on) { record_steps_ = on; }
  bool step_recording() const { return record_steps_; }
  uint64_t replayed_steps() const { return replayed_steps_; }  // steps that ran from a recording

 private:
  // The cross-attention queries of the layers marked in `layers`, copied to the host
  // during a step ([rows, d_model] per marked layer).
  struct CrossQueries {
    std::vector<bool> layers;
    std::vector<std::vector<float>> q;
  };
  void decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
              std::span<const int64_t> want, std::vector<float>& logits, CrossQueries* cross);
  // Blocks for the positions a step writes: new blocks past a table's end, and a copy of
  // any shared block it writes into; the copies' (source, destination) pool rows go to
  // `copy_from` / `copy_to`.
  void claim_blocks(WhisperSequence& seq, int64_t count, std::vector<int32_t>& copy_from,
                    std::vector<int32_t>& copy_to) const;
  // The step's index arrays on the device: `arrays` (host, laid out by the caller) as
  // ops::Indices views of one upload.
  std::vector<ops::Indices> stage(const std::vector<std::vector<int32_t>>& arrays);
  // Runs `run` (a decoder step of `rows` hypotheses) from its recording: op by op the
  // first time that shape is seen, recorded the second (and again whenever a buffer it
  // holds has moved), replayed after.
  void run_recorded(int64_t rows, const std::function<void()>& run);
  // Copy on write's device work: self-attention rows from[i] become rows to[i], in
  // every decoder layer.
  void copy_self_rows(const ops::Indices& from, const ops::Indices& to);

  struct Norm {
    Tensor weight, bias;
  };
  struct Linear {
    Tensor weight, bias;  // bias empty: none
  };
  struct Attention {
    Norm norm;
    Linear q, k, v, o;
  };
  struct Mlp {
    Norm norm;
    Linear fc1, fc2;
  };
  struct EncoderLayer {
    Attention self;
    Mlp mlp;
  };
  struct DecoderLayer {
    Attention self, cross;
    Mlp mlp;
  };

  Norm norm(WeightLoader& w, const std::string& name) const;
  Linear linear(WeightLoader& w, const std::string& name, int64_t out, int64_t in, bool bias = true) const;
  Attention attention(WeightLoader& w, const std::string& name) const;
  Mlp mlp(WeightLoader& w, const std::string& prefix, int64_t ffn) const;
  // out = x · weightᵀ + bias. rows_per_window > 0: encoder-side work on windows of that
  // many rows, which the CPU runs through EncoderCpu; 0 (decoder steps): matmul.
  void apply(const Linear& l, const Tensor& x, const Tensor& out, int64_t rows_per_window = 0) const;
  void layer_norm(const Norm& n, const Tensor& x, const Tensor& out) const;
  void run_mlp(const Mlp& m, const Tensor& x, layers::Scratch& s, int64_t n, int64_t rows_per_window = 0) const;

  WhisperConfig config_;
  Device device_;
  float eps_;
  Linear conv1_, conv2_;  // as matrices over im2col patches: [C_out, C_in * kernel]
  Tensor encoder_positions_;
  std::vector<EncoderLayer> encoder_;
  Norm encoder_norm_;
  Tensor embed_tokens_, decoder_positions_, output_;
  std::vector<DecoderLayer> decoder_;
  Norm decoder_norm_;
  WeightStorage storage_;
  std::unique_ptr<EncoderCpu> encoder_cpu_;  // the CPU's encoder GEMMs (null on other devices)
  audio::LogMel log_mel_;
  std::unique_ptr<audio::MelPowerBackend> log_mel_device_;  // the GPU's front end (null on the CPU)

  // Step buffers, grown as needed.
  layers::Scratch enc_, dec_;
  DeviceTensor mel_, patches1_, conv_out_, patches2_, picked_, logits_, copy_rows_;
  int64_t enc_windows_ = 0;
  std::vector<int32_t> frame_ids_;  // 0 .. audio_positions - 1
  std::vector<int32_t> all_last_;  // [audio_positions] of audio_positions - 1: every query sees every frame
  std::shared_ptr<WhisperKvPool> pool_;
  // A step's index arrays, laid end to end and uploaded in one copy (GPU devices).
  std::vector<int32_t> step_indices_;
  DeviceBuffer step_indices_device_;
  size_t step_indices_capacity_ = 0;
  uint64_t buffers_generation_ = 0;  // bumped when step_indices_device_, picked_ or logits_ move

  // What a recording was made against: any change makes it stale.
  struct StepRecording {
    int64_t id = -1;
    bool warm = false;  // the shape ran once op by op
    uint64_t backend_generation = 0, scratch_generation = 0, buffers_generation = 0;
    int numerics = 0;  // ops::quantized_matmul(): the kernels it picked
    bool same_buffers(const StepRecording& o) const {
      return backend_generation == o.backend_generation && scratch_generation == o.scratch_generation &&
             buffers_generation == o.buffers_generation && numerics == o.numerics;
    }
  };
  bool record_steps_ = true;
  uint64_t replayed_steps_ = 0;
  std::map<int64_t, StepRecording> recordings_;  // by hypothesis count
};

}  // namespace corvid
