// ThreadPool under stress: many back-to-back loops (workers waking late, claiming
// chunks of a finished job must be impossible), more threads than cores, and a
// pool destroyed right after use.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "corvid/core/thread_pool.h"

namespace corvid {
namespace {

TEST(ThreadPool, ManyShortLoopsEachIndexExactlyOnce) {
  ThreadPool pool(4);  // more threads than this machine's cores: workers are often descheduled
  std::vector<std::atomic<int>> hits(64);
  for (int rep = 0; rep < 5000; ++rep) {
    const int64_t n = 1 + rep % 64;
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].exchange(0), 1) << "rep " << rep;
  }
}

TEST(ThreadPool, ThreadIndexInRangeAndDestroyAfterUse) {
  for (int t = 1; t <= 3; ++t) {
    ThreadPool pool(t);
    std::atomic<int> bad{0};
    pool.parallel_for(1000, [&](int64_t, int64_t, int tid) {
      if (tid < 0 || tid >= t) bad++;
    });
    EXPECT_EQ(bad.load(), 0);
  }
}

}  // namespace
}  // namespace corvid
