// Scheduler: continuous batching over a paged KV cache.
//
// Every step it builds one batch under a token budget (max_num_batched_tokens) and
// a sequence cap (max_num_seqs):
//   1. one decode token for each running sequence that is generating (oldest first);
//   2. the next prefill chunk of each running sequence still in its prompt;
//   3. new sequences from the waiting queue (first come first served), each starting
//      from the longest cached prefix of its tokens and taking a chunk of what is left.
// A long prompt is thus prefilled in chunks across steps, interleaved with other
// sequences' decode tokens.
//
// Blocks come from the KV manager (kv/kv_manager.h: one table per layer group, each
// group's free list, then its prefix cache's LRU eviction). When a running sequence
// needs a block and some group has none left, the newest running sequence is preempted
// by recompute: it loses its blocks (full ones stay cached) and goes back to the front
// of the waiting queue; when re-admitted it prefills its prompt and what it generated
// so far again (mostly from the prefix cache). A waiting sequence never preempts.
//
// The scheduler owns no sequences and runs no model: the engine owns both and calls
// schedule() / commit() around each forward. Not thread-safe (one engine thread).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "corvid/kv/kv_manager.h"

namespace corvid {

struct SchedulerConfig {
  int64_t max_num_seqs = 64;              // sequences in one batch (running at once)
  int64_t max_num_batched_tokens = 512;   // tokens in one batch (decode tokens + prefill chunks)
  void validate() const;
};

// One sequence as the scheduler sees it: its tokens and its KV blocks.
struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then each sampled token as it is appended
  int64_t prompt_len = 0;
  int64_t computed = 0;         // leading tokens whose keys and values are in `kv`
  SequenceKv kv;                // its block tables, one per KV layer group
  int64_t cached_tokens = -1;   // prompt tokens found in the prefix cache at first admission (-1: not yet)
  int64_t preemptions = 0;
  bool running = false;
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;    // first position run (= seq->computed when scheduled)
  int64_t n = 0;        // tokens run
  bool sample = false;  // the chunk reaches the last token: sample the next one from its logits
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  int64_t tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(KvManager& kv, const SchedulerConfig& config);

  // Queues a sequence (not yet holding blocks) at the back of the waiting queue.
  void add(Sequence* seq);
  // The next batch. Sequences preempted while building it are back in the waiting queue.
  StepPlan schedule();
  // After the forward of `plan`: advances each sequence's computed count and caches
  // its newly filled blocks. Call before appending sampled tokens.
  void commit(const StepPlan& plan);
  // Removes a sequence (running or waiting) and releases its blocks.
  void remove(Sequence* seq);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  KvManager& kv() { return kv_; }

 private:
  // Grows seq's block tables to run positions [start, end). With may_preempt, preempts
  // the newest running sequences until it fits (false if seq itself was preempted);
  // without, returns false when blocks run out (what it took stays in seq->kv).
  bool reserve(Sequence& seq, int64_t start, int64_t end, bool may_preempt, StepPlan& plan, int64_t& budget);
  void preempt(Sequence& seq, StepPlan& plan, int64_t& budget);
  void release_blocks(Sequence& seq);
  void schedule_running(bool decode, StepPlan& plan, int64_t& budget);

  KvManager& kv_;
  SchedulerConfig config_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::deque<Sequence*> waiting_;
  int64_t preemptions_ = 0;
};

}  // namespace corvid
