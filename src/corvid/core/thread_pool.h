// A fixed pool of worker threads for data-parallel loops. parallel_for splits
// [0, n) into contiguous chunks, runs them on the workers and the caller, and
// returns when all are done. Workers spin briefly before sleeping so that the
// many short loops of a decode step do not pay a wake-up each.
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
  void run_chunks(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int64_t> next_chunk_{0};
  bool stop_ = false;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
};

}  // namespace corvid
