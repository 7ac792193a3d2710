#include "corvid/speech/whisper_batcher.h"

#include <algorithm>

#include "corvid/core/error.h"

namespace corvid {

WhisperBatcher::Stream::Stream(WhisperBatcher& batcher) : batcher_(batcher) {
  std::lock_guard<std::mutex> lock(batcher_.mutex_);
  ++batcher_.streams_;
}

WhisperBatcher::Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(batcher_.mutex_);
    --batcher_.streams_;
  }
  batcher_.wake_.notify_all();  // a step may have been waiting for this stream
}

WhisperBatcher::WhisperBatcher(WhisperModel& model, WhisperBatcherConfig config)
    : model_(model), config_(config), executor_([this] { run(); }) {}

WhisperBatcher::~WhisperBatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (executor_.joinable()) executor_.join();
}

WhisperBatcher::Stats WhisperBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void WhisperBatcher::submit(Call& call) {
  std::unique_lock<std::mutex> lock(mutex_);
  CORVID_CHECK(!stopping_, "whisper: the speech model is shutting down");
  if (queue_.empty()) oldest_ = std::chrono::steady_clock::now();
  queue_.push_back(&call);
  wake_.notify_all();
  done_.wait(lock, [&] { return call.done; });
  lock.unlock();
  if (call.error) std::rethrow_exception(call.error);
}

std::shared_ptr<EncodedAudio> WhisperBatcher::encode(std::span<const float> features, int64_t windows,
                                                     bool keep_states) {
  Call call;
  call.kind = Call::Kind::Encode;
  call.features = features;
  call.windows = windows;
  call.keep_states = keep_states;
  submit(call);
  return std::move(call.encoded);
}

void WhisperBatcher::decode(std::span<WhisperSequence* const> seqs, std::span<const std::vector<int32_t>> tokens,
                            std::span<const int64_t> want, std::vector<float>& logits) {
  Call call;
  call.kind = Call::Kind::Decode;
  call.seqs = seqs;
  call.tokens = tokens;
  call.want = want;
  call.logits = &logits;
  submit(call);
}

std::vector<float> WhisperBatcher::cross_attention(std::shared_ptr<const EncodedAudio> audio, int64_t window,
                                                   const std::vector<int32_t>& tokens,
                                                   std::span<const std::pair<int, int>> heads, int64_t frames,
                                                   std::vector<float>& logits) {
  std::vector<float> out;
  Call call;
  call.work = [&] { out = model_.cross_attention(audio, window, tokens, heads, frames, logits); };
  submit(call);
  return out;
}

std::vector<float> WhisperBatcher::spectrogram(std::span<const float> samples, int64_t pad, int64_t* frames) {
  // The CPU's front end is thread-safe: each stream computes its own, in parallel.
  if (model_.device() == Device::CPU) return model_.spectrogram(samples, pad, frames);
  std::vector<float> out;
  Call call;
  call.work = [&] { out = model_.spectrogram(samples, pad, frames); };
  submit(call);
  return out;
}

void WhisperBatcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing is left to run
    // Every stream's call, or as many as came within `gather` of the first.
    wake_.wait_until(lock, oldest_ + config_.gather, [this] {
      return stopping_ || static_cast<int64_t>(queue_.size()) >= streams_;
    });
    const std::vector<Call*> batch(queue_.begin(), queue_.end());
    queue_.clear();
    lock.unlock();
    run_batch(batch);
    lock.lock();
    for (Call* c : batch) c->done = true;
    done_.notify_all();
  }
}

void WhisperBatcher::run_batch(const std::vector<Call*>& batch) {
  const DeviceTurns::Turn turn(config_.device_turns);
  std::vector<Call*> encodes, decodes;
  for (Call* c : batch) {
    if (c->kind == Call::Kind::Encode) encodes.push_back(c);
    if (c->kind == Call::Kind::Decode) decodes.push_back(c);
  }
  run_encodes(encodes);
  run_decodes(decodes);
  for (Call* c : batch)
    if (c->kind == Call::Kind::Other) run_alone(*c, c->work, nullptr);
}

void WhisperBatcher::run_alone(Call& call, const std::function<void()>& work, uint64_t Stats::*runs) {
  try {
    work();
  } catch (...) {
    call.error = std::current_exception();
  }
  if (runs) count(runs);
}

void WhisperBatcher::count(uint64_t Stats::*field, uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.*field += n;
}

void WhisperBatcher::run_encodes(const std::vector<Call*>& calls) {
  auto alone = [this](Call* c) {
    run_alone(*c, [&] { c->encoded = model_.encode(c->features, c->windows, c->keep_states); }, &Stats::encode_runs);
  };
  count(&Stats::encode_calls, calls.size());
  for (const bool keep : {false, true}) {
    std::vector<Call*> group;
    for (Call* c : calls)
      if (c->keep_states == keep) group.push_back(c);
    if (group.size() == 1) alone(group.front());
    if (group.size() < 2) continue;
    std::vector<float> features;
    std::vector<int64_t> parts;
    for (const Call* c : group) {
      features.insert(features.end(), c->features.begin(), c->features.end());
      parts.push_back(c->windows);
    }
    try {
      std::vector<std::shared_ptr<EncodedAudio>> encoded = model_.encode_parts(features, parts, keep);
      for (size_t i = 0; i < group.size(); ++i) group[i]->encoded = std::move(encoded[i]);
      count(&Stats::encode_runs);
    } catch (...) {
      // Some call is malformed, or the windows do not all fit at once: each on its own.
      for (Call* c : group) alone(c);
    }
  }
}

void WhisperBatcher::run_decodes(const std::vector<Call*>& calls) {
  auto alone = [this](Call* c) {
    run_alone(*c, [&] { model_.decode(c->seqs, c->tokens, c->want, *c->logits); }, &Stats::decode_steps);
  };
  count(&Stats::decode_calls, calls.size());
  // A call the model would refuse fails here, before it could fail a merged step.
  std::vector<Call*> valid;
  for (Call* c : calls) {
    try {
      model_.check_step(c->seqs, c->tokens, c->want);
      valid.push_back(c);
    } catch (...) {
      c->error = std::current_exception();
    }
  }
  if (valid.size() == 1) alone(valid.front());
  if (valid.size() < 2) return;
  std::vector<WhisperSequence*> seqs;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int64_t> want;
  int64_t rows = 0;
  for (const Call* c : valid) {
    seqs.insert(seqs.end(), c->seqs.begin(), c->seqs.end());
    tokens.insert(tokens.end(), c->tokens.begin(), c->tokens.end());
    for (int64_t r : c->want) want.push_back(rows + r);
    for (const std::vector<int32_t>& t : c->tokens) rows += static_cast<int64_t>(t.size());
  }
  std::vector<float> logits;
  try {
    model_.decode(seqs, tokens, want, logits);
  } catch (...) {
    // The pool ran out part way (a step that is refused changes nothing it cannot
    // redo): each call on its own, so that those that fit still run.
    for (Call* c : valid) alone(c);
    return;
  }
  count(&Stats::decode_steps);
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  size_t row = 0;
  for (Call* c : valid) {
    const auto from = logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
    c->logits->assign(from, from + static_cast<std::ptrdiff_t>(c->want.size() * vocab));
    row += c->want.size();
  }
}

}  // namespace corvid
