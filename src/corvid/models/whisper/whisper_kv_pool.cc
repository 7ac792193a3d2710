#include "corvid/models/whisper/whisper_kv_pool.h"

#include "corvid/core/error.h"
#include "corvid/kv/state_spec.h"

namespace corvid {

namespace {

std::vector<LayerState> decoder_spec(const WhisperConfig& c) {
  return uniform_kv_spec(c.decoder_layers, c.decoder_heads, c.decoder_head_dim());
}

int64_t checked(int64_t value, const char* what) {
  CORVID_CHECK(value >= 1, "whisper: a capacity of ", value, " ", what, " (at least 1)");
  return value;
}

DType checked_dtype(const WhisperCapacity& capacity, Device device) {
  const DType t = capacity.kv_dtype.value_or(WhisperKvPool::default_kv_dtype(device));
  CORVID_CHECK(t == DType::F32 || (device != Device::CPU && t == DType::F16), "whisper: a ", dtype_name(t),
               " KV cache on the ", device == Device::CPU ? "CPU" : "GPU", " (the CPU keeps F32; a GPU F32 or F16)");
  return t;
}

}  // namespace

// A hypothesis of full length holds ceil(text_positions / kSelfBlock) blocks; one more
// per hypothesis covers the copy a fork makes of its parent's last block while the
// parent still holds it.
WhisperKvPool::WhisperKvPool(const WhisperConfig& config, const WhisperCapacity& capacity, Device device)
    : capacity_(capacity),
      blocks_per_hypothesis_((config.text_positions + kSelfBlock - 1) / kSelfBlock),
      self_(decoder_spec(config), kSelfBlock,
            checked(capacity.streams, "streams") * checked(capacity.hypotheses, "hypotheses") *
                (blocks_per_hypothesis_ + 1),
            device, checked_dtype(capacity, device)),
      cross_(decoder_spec(config), config.audio_positions,
             capacity.streams * checked(capacity.windows, "windows"), device, checked_dtype(capacity, device)) {}

DType WhisperKvPool::default_kv_dtype(Device device) { return device == Device::CPU ? DType::F32 : DType::F16; }

int64_t WhisperKvPool::bytes() const {
  auto pool_bytes = [](const BlockPool& p) {
    int64_t sum = 0;
    for (int64_t l = 0; l < p.num_layers(); ++l) sum += static_cast<int64_t>(p.keys(l).nbytes() + p.values(l).nbytes());
    return sum;
  };
  return pool_bytes(self_) + pool_bytes(cross_);
}

int32_t WhisperKvPool::take(BlockPool& pool, const char* blocks, int64_t per_stream, const char* unit) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::optional<int32_t> b = pool.allocate();
  CORVID_CHECK(b.has_value(), "whisper: all ", pool.num_blocks(), " ", blocks, " are in use (", capacity_.streams,
               " streams of ", per_stream, " ", unit, ")");
  return *b;
}

void WhisperKvPool::release(BlockPool& pool, int32_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pool.unref(block) == 0) pool.free(block);
}

int32_t WhisperKvPool::take_self() {
  return take(self_, "self-attention blocks", capacity_.hypotheses, "hypotheses");
}

int32_t WhisperKvPool::take_cross() { return take(cross_, "encoded windows", capacity_.windows, "windows"); }

void WhisperKvPool::share_self(int32_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  self_.ref(block);
}

bool WhisperKvPool::self_shared(int32_t block) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return self_.refcount(block) > 1;
}

void WhisperKvPool::release_self(int32_t block) { release(self_, block); }

void WhisperKvPool::release_cross(int32_t block) { release(cross_, block); }

int64_t WhisperKvPool::self_blocks_used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return self_.num_referenced();
}

int64_t WhisperKvPool::cross_blocks_used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cross_.num_referenced();
}

}  // namespace corvid
