#include "corvid/core/thread_pool.h"

#include <algorithm>
#include <memory>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace corvid {

namespace {
int g_requested_threads = 0;
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    work_.store(0);  // generation 0, no chunks: nothing to claim on the way out
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// The work word: [generation: 40 bits][chunk count: 12 bits][next unclaimed chunk: 12 bits].
// Carrying the count in the word matters: a claim is validated against the count of its own
// generation, never against fields that the caller may already be rewriting for the next job.
constexpr int kCountBits = 12;
constexpr uint64_t kMaxChunks = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << 40) - 1;
inline uint64_t make_word(uint64_t gen, uint64_t chunks) {
  return ((gen & kGenMask) << (2 * kCountBits)) | (chunks << kCountBits);
}
inline uint64_t word_gen(uint64_t w) { return w >> (2 * kCountBits); }
inline uint64_t word_chunks(uint64_t w) { return (w >> kCountBits) & kMaxChunks; }
inline uint64_t word_next(uint64_t w) { return w & kMaxChunks; }
}  // namespace

void ThreadPool::run_chunks(uint64_t generation, int thread_index) {
  for (;;) {
    uint64_t w = work_.load(std::memory_order_acquire);
    uint64_t c;
    do {
      if (word_gen(w) != (generation & kGenMask)) return;  // a newer job (or none) is posted
      c = word_next(w);
      if (c >= word_chunks(w)) return;                      // all chunks claimed
    } while (!work_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    // The claim succeeded for `generation` with chunks left, so the caller is still inside that
    // job's parallel_for and the job fields stay valid until this chunk is counted done.
    const int64_t begin = static_cast<int64_t>(c) * job_chunk_;
    const int64_t end = std::min(job_n_, begin + job_chunk_);
    (*job_)(begin, end, thread_index);
    // The last chunk wakes a caller that stopped spinning (see parallel_for).
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int64_t>(word_chunks(w))) {
      done_.notify_all();
    }
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (the next loop of a decode step usually follows within microseconds), then
    // sleep. 2000 pauses is ~30 us here (a pause is ~15 ns): it covers the serial gaps between
    // the matmuls of a layer. It was 20000 (~300 us); on a shared machine that spinning ate the
    // process's CPU share and made 2-thread decode ~2x slower than 1 thread.
    for (int spin = 0; spin < 2000 && generation_.load(std::memory_order_acquire) == seen; ++spin) cpu_relax();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(seen, index);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || max_chunks == 1) {
    fn(0, n, 0);
    return;
  }
  // A few chunks per thread balance uneven work without much overhead.
  const int64_t chunks_wanted =
      std::min<int64_t>({max_chunks, static_cast<int64_t>(n_threads_) * 4, static_cast<int64_t>(kMaxChunks)});
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + chunks_wanted - 1) / chunks_wanted;
  const int64_t chunks = (n + job_chunk_ - 1) / job_chunk_;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  work_.store(make_word(gen, static_cast<uint64_t>(chunks)), std::memory_order_release);  // publishes the fields above
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen, std::memory_order_release);
  }
  cv_.notify_all();
  run_chunks(gen, 0);
  // Every chunk is claimed now; wait for those still running on workers. Spin briefly, then
  // block: when the machine is oversubscribed, a worker holding the last chunk may have been
  // preempted, and a caller spinning on its own core keeps the scheduler from moving that
  // worker there. Blocking frees the core. (Under a parallel build on this 2-core machine the
  // pool still loses to one thread: workers get little CPU, see docs in ops/cpu/matmul.cc.)
  for (int spin = 0; spin < 2000 && done_.load(std::memory_order_acquire) != chunks; ++spin) cpu_relax();
  for (int64_t d; (d = done_.load(std::memory_order_acquire)) != chunks;) done_.wait(d, std::memory_order_acquire);
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested_threads);
  return pool;
}

void ThreadPool::set_global_threads(int n_threads) { g_requested_threads = n_threads; }

}  // namespace corvid
