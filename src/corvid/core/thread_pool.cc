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
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int thread_index) {
  for (;;) {
    int64_t c = next_chunk_.fetch_add(1);
    if (c >= job_chunks_) break;
    int64_t begin = c * job_chunk_;
    int64_t end = std::min(job_n_, begin + job_chunk_);
    (*job_)(begin, end, thread_index);
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (the next loop of a decode step usually follows within microseconds), then sleep.
    for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen; ++spin) cpu_relax();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    run_chunks(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
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
  int64_t chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(n_threads_) * 4);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + chunks - 1) / chunks;
  job_chunks_ = (n + job_chunk_ - 1) / job_chunk_;
  next_chunk_.store(0);
  pending_.store(n_threads_ - 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  run_chunks(0);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
  job_ = nullptr;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested_threads);
  return pool;
}

void ThreadPool::set_global_threads(int n_threads) { g_requested_threads = n_threads; }

}  // namespace corvid
