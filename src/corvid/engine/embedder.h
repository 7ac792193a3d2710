// Embedder: the engine of a server started with --task embed (and of `corvid
// embed`). Inputs (token lists) from any thread queue up; its own thread takes as
// many as fit in one step (max_batch_tokens, max_batch_seqs; an input is never
// split), runs them as one batch, pools each input's hidden states as the model's
// PoolingConfig says, and hands every request its vectors when the last of its
// inputs is done. Nothing is kept between steps:
// - an encoder (BERT) runs Runner::encode, every token's hidden state, attention
//   inside each input;
// - a decoder runs Runner::forward_batch over a small paged KV pool of its own (just
//   enough blocks for one step) and returns the last token's hidden state; the
//   blocks are released at once.
// On the CPU an input's vector does not depend on what it was batched with (the
// matmuls and attention are batch invariant; tested).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "corvid/engine/loaded_model.h"
#include "corvid/engine/pooling.h"
#include "corvid/kv/kv_manager.h"

namespace corvid {

struct EmbedderConfig {
  int64_t max_batch_tokens = 8192;  // tokens in one step (also the longest input a decoder takes)
  int64_t max_batch_seqs = 256;     // inputs in one step
  int64_t max_waiting = 4096;       // inputs queued before submit() refuses (429)
  KvFormat kv_format = DType::F32;  // a decoder's step pool
};

struct EmbeddingResult {
  std::vector<std::vector<float>> embeddings;  // one per input, in order
  std::vector<int64_t> tokens;                 // each input's token count
  std::string error;                           // set: the step failed, no embeddings
};

class Embedder {
 public:
  // `model` outlives the embedder.
  Embedder(LoadedModel& model, PoolingConfig pooling, EmbedderConfig config = {});
  ~Embedder();
  Embedder(const Embedder&) = delete;
  Embedder& operator=(const Embedder&) = delete;

  using Callback = std::function<void(EmbeddingResult)>;
  // Queues `inputs` (each a non-empty token list within the vocabulary and at most
  // max_input_tokens() long); `done` runs on the embedder's thread. Throws
  // RequestRejected: Invalid / TooLong (400), QueueFull (429), Unavailable (503).
  void submit(std::vector<std::vector<int32_t>> inputs, Callback done);
  // submit() and wait; throws corvid::Error when the step failed.
  std::vector<std::vector<float>> embed(std::vector<std::vector<int32_t>> inputs);

  int64_t dimensions() const { return model_.model->config().hidden_size; }
  int64_t max_input_tokens() const { return max_input_tokens_; }
  const PoolingConfig& pooling() const { return pooling_; }
  bool encoder() const { return encoder_; }
  int64_t steps() const;  // batched steps run so far

  // Refuses new inputs, finishes what is queued, and joins the thread (the destructor
  // calls it).
  void shutdown();

 private:
  struct Job {
    std::vector<std::vector<int32_t>> inputs;
    EmbeddingResult result;
    size_t remaining = 0;
    Callback done;
  };
  struct Item {
    std::shared_ptr<Job> job;
    size_t index = 0;
  };

  void run();
  void run_step(std::vector<Item>& items);
  void run_encoder(const std::vector<Item>& items, std::vector<std::vector<float>>& out);
  void run_decoder(const std::vector<Item>& items, std::vector<std::vector<float>>& out);

  LoadedModel& model_;
  PoolingConfig pooling_;
  EmbedderConfig config_;
  bool encoder_ = false;
  int64_t max_input_tokens_ = 0;
  std::unique_ptr<KvManager> kv_;  // a decoder's step pool
  std::vector<float> hidden_;      // a step's hidden states on the host

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t steps_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace corvid
