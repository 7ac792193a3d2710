#include "corvid/engine/scheduler.h"

#include <algorithm>

#include "corvid/core/error.h"

namespace corvid {

void SchedulerConfig::validate() const {
  CORVID_CHECK(max_num_seqs > 0, "max_num_seqs must be positive, got ", max_num_seqs);
  CORVID_CHECK(max_num_batched_tokens >= max_num_seqs, "max_num_batched_tokens (", max_num_batched_tokens,
               ") must be at least max_num_seqs (", max_num_seqs, ")");
}

Scheduler::Scheduler(KvManager& kv, const SchedulerConfig& config) : kv_(kv), config_(config) {
  config_.validate();
}

void Scheduler::add(Sequence* seq) {
  CORVID_CHECK(seq && !seq->tokens.empty(), "scheduler: a sequence needs at least one token");
  CORVID_CHECK(seq->kv.empty() && seq->computed == 0, "scheduler: a new sequence must not hold blocks");
  seq->running = false;
  waiting_.push_back(seq);
}

void Scheduler::release_blocks(Sequence& seq) {
  kv_.release(seq.kv);
  seq.computed = 0;
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  seq->running = false;
  release_blocks(*seq);
}

void Scheduler::preempt(Sequence& seq, StepPlan& plan, int64_t& budget) {
  auto chunk = std::find_if(plan.chunks.begin(), plan.chunks.end(), [&](const auto& c) { return c.seq == &seq; });
  if (chunk != plan.chunks.end()) {
    budget += chunk->n;
    plan.tokens -= chunk->n;
    plan.chunks.erase(chunk);
  }
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  release_blocks(seq);
  seq.running = false;
  ++seq.preemptions;
  ++preemptions_;
  waiting_.push_front(&seq);
}

bool Scheduler::reserve(Sequence& seq, int64_t start, int64_t end, bool may_preempt, StepPlan& plan,
                        int64_t& budget) {
  while (!kv_.reserve(seq.kv, start, end)) {
    if (!may_preempt || running_.empty()) return false;
    Sequence* victim = running_.back();
    preempt(*victim, plan, budget);
    if (victim == &seq) return false;
  }
  return true;
}

void Scheduler::schedule_running(bool decode, StepPlan& plan, int64_t& budget) {
  // Indexing (not iterators): preemption removes sequences from the back meanwhile.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& seq = *running_[i];
    const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.computed;
    if ((remaining == 1) != decode || remaining <= 0) continue;
    const int64_t n = std::min(remaining, budget);
    const int64_t start = seq.computed;
    if (!reserve(seq, start, start + n, /*may_preempt=*/true, plan, budget)) break;  // seq itself was the newest
    plan.chunks.push_back({&seq, start, n, start + n == static_cast<int64_t>(seq.tokens.size())});
    plan.tokens += n;
    budget -= n;
  }
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t budget = config_.max_num_batched_tokens;
  schedule_running(/*decode=*/true, plan, budget);
  schedule_running(/*decode=*/false, plan, budget);
  while (!waiting_.empty() && budget > 0 && num_running() < config_.max_num_seqs) {
    Sequence& seq = *waiting_.front();
    const int64_t total = static_cast<int64_t>(seq.tokens.size());
    // The last token always runs (its logits give the next token), so at most total - 1 come from the cache.
    seq.computed = kv_.acquire_prefix(seq.tokens, total - 1, seq.kv);
    const int64_t n = std::min(total - seq.computed, budget);
    if (!reserve(seq, seq.computed, seq.computed + n, /*may_preempt=*/false, plan, budget)) {
      release_blocks(seq);  // wait for running sequences to finish
      break;
    }
    kv_.record_lookup(total, seq.computed);
    if (seq.cached_tokens < 0) seq.cached_tokens = std::min(seq.computed, seq.prompt_len);
    waiting_.pop_front();
    running_.push_back(&seq);
    seq.running = true;
    plan.chunks.push_back({&seq, seq.computed, n, seq.computed + n == total});
    plan.tokens += n;
    budget -= n;
  }
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    Sequence& seq = *chunk.seq;
    CORVID_CHECK(seq.computed == chunk.start, "scheduler: sequence ", seq.id, " changed since it was scheduled");
    seq.computed += chunk.n;
    kv_.commit(seq.kv, seq.tokens, seq.computed);
  }
}

}  // namespace corvid
