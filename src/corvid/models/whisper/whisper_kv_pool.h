// WhisperKvPool: where a Whisper model keeps the keys and values its decoder reads,
// as two paged pools (kv/block_pool.h) of every decoder layer:
// - self-attention: blocks of kSelfBlock positions; a hypothesis holds a block table
//   that grows with it. Beam search's copies share blocks (a reference each) and the
//   step that writes into a shared block first gives the writer its own copy of it
//   (copy on write), so a fork costs no device work until it diverges;
// - cross-attention: one block per 30-s window (audio_positions rows), written once by
//   the encoder and read by every hypothesis decoding that window.
// The pools are sized up front for `streams` transcriptions at once, each with up to
// `hypotheses` hypotheses of the decoder's full length and `windows` windows encoded,
// so that a stream the server admits can never run out of blocks.
//
// Handing out and returning blocks is thread-safe (hypotheses are made and dropped by
// the threads that decode them); the contents are written only by the thread that
// runs the model's steps.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "corvid/core/dtype.h"
#include "corvid/kv/block_pool.h"
#include "corvid/models/whisper/whisper_config.h"

namespace corvid {

struct WhisperCapacity {
  int64_t streams = 1;     // transcriptions decoded at once
  int64_t hypotheses = 5;  // per stream: beam size or best_of at most
  int64_t windows = 1;     // per stream: windows encoded and alive at once
  // The pools' element type; unset: WhisperKvPool::default_kv_dtype of the device.
  std::optional<DType> kv_dtype;
};

class WhisperKvPool {
 public:
  static constexpr int64_t kSelfBlock = 16;

  WhisperKvPool(const WhisperConfig& config, const WhisperCapacity& capacity, Device device);
  WhisperKvPool(const WhisperKvPool&) = delete;
  WhisperKvPool& operator=(const WhisperKvPool&) = delete;

  const WhisperCapacity& capacity() const { return capacity_; }
  // Blocks a hypothesis of the decoder's full length holds.
  int64_t blocks_per_hypothesis() const { return blocks_per_hypothesis_; }
  // Bytes of both pools (what the capacity costs on the device).
  int64_t bytes() const;

  // The element type of both pools when the capacity names none: F32 on the CPU (its
  // kernels' only KV type), F16 on the GPU, where a decoder step's time is mostly
  // reading the cross-attention keys and values (F32 halves the step's speed).
  static DType default_kv_dtype(Device device);
  DType kv_dtype() const { return self_.format().keys; }
  // Storage per decoder layer: [blocks * block_size, heads, head_dim] of kv_dtype.
  const BlockPool& self() const { return self_; }
  const BlockPool& cross() const { return cross_; }

  // A fresh block (reference count 1). Throws corvid::Error when the pool is spent.
  int32_t take_self();
  int32_t take_cross();
  void share_self(int32_t block);  // one more holder
  bool self_shared(int32_t block) const;  // more than one holder
  void release_self(int32_t block);
  void release_cross(int32_t block);
  int64_t self_blocks_used() const;
  int64_t cross_blocks_used() const;

 private:
  // A fresh block of `pool`, or the error naming what is spent: `blocks`, and the
  // capacity's streams of `per_stream` `unit`.
  int32_t take(BlockPool& pool, const char* blocks, int64_t per_stream, const char* unit);
  void release(BlockPool& pool, int32_t block);  // one holder fewer; freed at none

  WhisperCapacity capacity_;
  int64_t blocks_per_hypothesis_;
  BlockPool self_, cross_;
  mutable std::mutex mutex_;
};

}  // namespace corvid
