// Engine: the serving engine under the HTTP server. One scheduler thread owns the
// model, the paged KV state (KvManager: a block pool and prefix cache per KV layer
// group) and the Scheduler; it runs
// continuous batching steps (Runner::forward_batch) while any request is in
// flight and sleeps otherwise.
//
// Any thread may submit(), cancel() and force_tokens(). Each request samples with its own Sampler
// (its parameters, seeded RNG and penalties; with the model on a GPU the step's
// logits stay there and one ops::sample_tokens call samples every row, so only
// token ids, and the rows of requests that want logprobs, cross to the host),
// stops on EOS / its stop token ids / its stop strings (matched on the decoded text,
// with any text that might begin a stop string held back until decided; the stop
// string itself is never returned) / max_tokens, and reports through events.
//
// Memory admission: the pools are sized once at construction (KvManager::plan_blocks
// splits the budget between the layer groups); a request whose prompt plus
// max_tokens could never fit (context length or the full-attention groups' blocks;
// sliding groups hold a bounded window) is rejected at
// submit with a message naming the limit, and a full waiting queue rejects with
// QueueFull. Admitted requests wait for blocks; running out mid-generation preempts
// (the scheduler's recompute), so no request can exhaust memory.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/device_turns.h"
#include "corvid/engine/format_masks.h"
#include "corvid/engine/request.h"
#include "corvid/engine/scheduler.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/engine/runner.h"
#include "corvid/ops/sampling.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

struct EngineConfig {
  int64_t kv_cache_bytes = int64_t{1} << 30;  // KV budget over all groups (ignored when num_blocks > 0)
  int64_t num_blocks = 0;                     // exact size of every group's pool (tests)
  int64_t block_size = 16;                    // positions per KV block
  SchedulerConfig scheduler;
  int64_t max_model_len = 0;                  // longest prompt + max_tokens; 0: the model's context length
  int64_t max_waiting = 1024;                 // requests queued (not running) before QueueFull
  bool enable_prefix_caching = true;
  KvFormat kv_format = DType::F32;  // the KV pool's (kv/kv_format.h: F16 / BF16 on a GPU only)
  // Per-layer formats (kv/kv_config.h), one entry per model layer; empty: kv_format for all.
  std::vector<std::optional<KvFormat>> kv_layer_formats;
  // The delayed switch (kv/kv_manager.h): a sequence's first positions that coded layers
  // keep in 16 bits (f32 on the CPU); 0: none.
  int64_t kv_quant_start = 0;
  std::optional<DType> kv_head_dtype;  // its dtype; unset: bf16 on CUDA, f32 on the CPU (tests)
  int format_mask_threads = 4;                // threads filling a step's structured-output masks
  // Set when another model shares the device (a speech model beside it in corvid serve):
  // each step runs in a turn of it (core/device_turns.h). Outlives the engine.
  DeviceTurns* device_turns = nullptr;
};

struct EngineStats {
  int64_t running = 0, waiting = 0;
  int64_t blocks_total = 0, blocks_used = 0, blocks_cached = 0;  // over all groups; used: referenced by a sequence
  std::vector<KvGroupStats> kv_groups;                          // the same per KV layer group
  int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;      // in tokens
  int64_t prompt_tokens = 0, generation_tokens = 0;            // processed so far
  int64_t requests_finished = 0, preemptions = 0, steps = 0;
};

class Engine {
 public:
  // The runner (and its model) must outlive the engine and must not be used by anything
  // else meanwhile. tokenizer may be null (then no text, no stop strings, no EOS from it).
  Engine(Runner& runner, const Tokenizer* tokenizer, const EngineConfig& config);
  // Cancels what is in flight (each request gets its "cancelled" event) and joins the thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws RequestRejected (before queuing anything) when it is
  // invalid, can never fit, or the waiting queue is full.
  RequestHandle submit(GenerationRequest request);
  // Ends a request at the next step boundary: its blocks are released and it gets a
  // "cancelled" event. Unknown or finished ids are ignored.
  void cancel(int64_t request_id);
  // Makes a request's next generated tokens these, whatever the model samples (how a
  // reasoning budget closes the reasoning). They take effect from the first token the
  // engine thread produces after it sees them, count as output and pass the stop checks.
  // Unknown or finished ids are ignored; an id outside the vocabulary throws.
  void force_tokens(int64_t request_id, std::vector<int32_t> tokens);
  // Finishes nothing new: cancels everything in flight and stops the thread (idempotent).
  void shutdown();

  EngineStats stats() const;
  int64_t max_model_len() const { return max_model_len_; }
  int64_t vocab_size() const { return runner_.config().vocab_size; }  // the logits' width
  int64_t num_blocks() const { return kv_->blocks_total(); }  // over all groups
  int64_t block_size() const { return kv_->block_size(); }
  // The longest sequence (prompt + output) the KV pools can hold.
  int64_t max_tokens_per_sequence() const { return kv_->max_positions_per_sequence(); }
  int64_t kv_bytes() const { return kv_->total_bytes(); }
  const KvManager& kv() const { return *kv_; }

 private:
  struct Active;

  void loop();
  void admit_new_requests();
  void run_step(const StepPlan& plan);
  // The logits buffer of a step: host memory, or (model on a GPU) device memory.
  Tensor host_logits(int64_t rows);
  Tensor device_logits(int64_t rows);
  // Samples a host logits row with the request's Sampler. raw_logits: the row before the
  // sampler rewrote it when the request wants logprobs (else null).
  int32_t sample_on_host(Active& active, float* logits, const float*& raw_logits);
  // Samples every row of sampling_rows_ on the device in one op, then handles each token.
  void sample_on_device(const Tensor& logits);
  // Handles a sampled token: stop ids, detokenizing, stop strings, max_tokens, events.
  // raw_logits: the row's unmodified logits on the host, for logprobs (null: none wanted).
  void on_token(Active& active, int32_t token, const float* raw_logits);
  // Moves the request's format past `token` (starting it after format_after); true when
  // the format is complete and the request has no stop token that could end it.
  // Throws for a token the format does not allow.
  bool follow_format(Active& active, int32_t token);
  void emit(Active& active, RequestEvent event);
  void finish(Active& active, FinishReason reason, RequestEvent event, const std::string& error = "");
  void validate(const GenerationRequest& request) const;
  void publish_stats();

  Runner& runner_;
  const Tokenizer* tokenizer_;
  EngineConfig config_;
  int64_t max_model_len_ = 0;
  std::vector<int32_t> eos_ids_;
  std::unique_ptr<KvManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;

  // Shared with submitters (under mutex_).
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Active>> inbox_;
  std::vector<int64_t> cancels_;
  std::vector<std::pair<int64_t, std::vector<int32_t>>> forces_;
  bool stopping_ = false;
  int64_t next_id_ = 1;
  EngineStats stats_;  // the snapshot stats() returns

  // Engine thread only.
  std::unordered_map<int64_t, std::unique_ptr<Active>> active_;
  std::vector<BatchSequence> batch_;
  std::vector<float> logits_, logprob_scratch_;
  DeviceTensor device_logits_;                 // model on a GPU: the step's logits stay there
  std::vector<Active*> sampling_rows_;         // the requests of the step's logits rows, in order
  std::vector<FormatMatcher*> row_formats_;    // per row: its request's format matcher, or null
  FormatMasks format_masks_;
  std::vector<ops::TokenSampling> row_params_;
  std::vector<int32_t> sampled_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, finished_ = 0, steps_ = 0;

  std::thread thread_;
};

}  // namespace corvid
