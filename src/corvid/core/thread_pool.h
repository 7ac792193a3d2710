// A fixed pool of worker threads for data-parallel loops. parallel_for splits
// [0, n) into contiguous chunks, runs them on the workers and the caller, and
// returns when all are done. Workers spin briefly before sleeping so that the
// many short loops of a decode step do not pay a wake-up each.
//
// The caller waits for chunks, not for workers: chunks are claimed from a
// counter tagged with the job's generation, and parallel_for returns once every
// chunk has completed. A worker that the OS has not scheduled yet (a busy
// machine) therefore never delays a loop; it finds the job finished and goes back
// to waiting. (Waiting for every worker to check in cost a scheduler time slice
// per loop under load: hundreds of milliseconds per decode step.)
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace corvid {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads includes the caller; <= 0 means hardware threads
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, thread_index); chunks are at least `grain` long.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain = 1);

  // The process-wide pool used by ops; set_global_threads must run before first use to take effect.
  static ThreadPool& global();
  static void set_global_threads(int n_threads);

 private:
  void worker(int index);
  void run_chunks(uint64_t generation, int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};  // wake-up signal: bumped per job
  // Generation, chunk count and next unclaimed chunk of the posted job in one word (see
  // thread_pool.cc); claims are CAS on it, so a late worker can never take a chunk of a newer job.
  std::atomic<uint64_t> work_{0};
  std::atomic<int64_t> done_{0};  // chunks completed in the current job
  std::atomic<bool> stop_{false};
  // Valid for a generation while any of its chunks is unfinished; read only after a claim.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
};

}  // namespace corvid
