// DeviceTurns: models that share one backend take turns with it. The CPU ops' thread
// pool (ThreadPool::global: one parallel_for at a time) and the CUDA backend's context
// (its stream, scratch, upload slots and step recordings) each serve one caller at a
// time, so a server running two models from two threads (the text engine's and the
// speech worker's) has each hold a turn while it runs a step (the engine) or a 30-s
// window (the transcriber). Turns are granted in the order they were asked for, so
// neither side starves the other: each waits at most one of the other's turns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace corvid {

class DeviceTurns {
 public:
  // Blocks until every turn asked for earlier has been released.
  void acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t ticket = next_++;
    turn_.wait(lock, [&] { return serving_ == ticket; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++serving_;
    }
    turn_.notify_all();
  }

  // A turn for a scope; a null DeviceTurns (a model alone on its device) gives none.
  class Turn {
   public:
    explicit Turn(DeviceTurns* turns) : turns_(turns) {
      if (turns_) turns_->acquire();
    }
    ~Turn() {
      if (turns_) turns_->release();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    DeviceTurns* turns_;
  };

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t next_ = 0, serving_ = 0;
};

}  // namespace corvid
