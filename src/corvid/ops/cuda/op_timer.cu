// CORVID_OP_TIMES=1: GPU time per op, for finding where a prefill or an unrecorded step
// goes (the device has no timeline profiler). Each timed op records a CUDA event pair on
// the stream; the pairs are read in batches and summed per name; the table goes to
// stderr at exit. Ops inside a graph recording are not timed, nor are graph replays
// (recorded decode steps), sample_tokens and rearrange_weight: this is for prompts and
// unrecorded steps.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "corvid/core/env.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/cuda_ops.h"

namespace corvid::ops::cuda {

namespace {

struct Pending {
  const char* name;
  cudaEvent_t start, end;
};

struct Total {
  int64_t count = 0;
  double ms = 0;
};

class OpTimes {
 public:
  static OpTimes& get() {
    static OpTimes* t = [] {
      auto* p = new OpTimes();  // never destroyed: read at exit, before the runtime shuts down
      std::atexit([] { get().report(); });
      return p;
    }();
    return *t;
  }
  cudaEvent_t event() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CORVID_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void add(const char* name, cudaEvent_t start, cudaEvent_t end) {
    pending_.push_back({name, start, end});
    if (pending_.size() >= 2048) drain();
  }
  void drain() {
    if (pending_.empty()) return;
    std::vector<Pending> done;
    done.swap(pending_);  // a failure below must not leave them to be counted again
    CORVID_CUDA_CHECK(cudaStreamSynchronize(context().stream));
    for (const Pending& p : done) {
      float ms = 0;
      CORVID_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.end));
      Total& t = totals_[p.name];
      ++t.count;
      t.ms += ms;
      free_.push_back(p.start);
      free_.push_back(p.end);
    }
  }
  void reset() {
    drain();
    totals_.clear();
  }
  void report() {
    try {
      drain();
    } catch (const Error& e) {
      std::fprintf(stderr, "corvid: CORVID_OP_TIMES: %s\n", e.what());
      return;
    }
    double top = 0;  // names with a '.' are parts of an op, already inside its time
    for (const auto& [name, t] : totals_)
      if (name.find('.') == std::string::npos) top += t.ms;
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::fprintf(stderr, "corvid: GPU time per op (CUDA events, CORVID_OP_TIMES)\n%-28s %8s %12s %10s %7s\n", "op",
                 "calls", "total ms", "us/call", "share");
    for (const auto& [name, t] : rows)
      std::fprintf(stderr, "%-28s %8lld %12.3f %10.2f %6.1f%%\n", name.c_str(), static_cast<long long>(t.count), t.ms,
                   1000.0 * t.ms / static_cast<double>(t.count), top > 0 ? 100.0 * t.ms / top : 0.0);
  }

 private:
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Total> totals_;
};

bool op_times_enabled() {
  static const bool on = env_flag("CORVID_OP_TIMES");
  return on;
}

}  // namespace

void reset_op_times() {
  if (op_times_enabled()) OpTimes::get().reset();
}

OpTimer::OpTimer(const char* name) {
  if (!op_times_enabled() || context().capturing) return;
  OpTimes& t = OpTimes::get();
  start_ = t.event();
  end_ = t.event();
  CORVID_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(start_), context().stream));
  name_ = name;  // timed from here on
}

OpTimer::~OpTimer() {
  if (name_ == nullptr) return;
  // Destructors must not throw: a failed record leaves this op out of the table.
  if (cudaEventRecord(static_cast<cudaEvent_t>(end_), context().stream) != cudaSuccess) return;
  try {
    OpTimes::get().add(name_, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(end_));
  } catch (...) {  // profiling must never take the process down
  }
}

}  // namespace corvid::ops::cuda
