// The Responses API's store of finished responses: LRU order, the byte budget, delete,
// and many threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "corvid/server/response_store.h"

namespace corvid::server {
namespace {

std::shared_ptr<const StoredResponse> entry(const std::string& id, size_t text_bytes = 10) {
  auto e = std::make_shared<StoredResponse>();
  e->response = {{"id", id}, {"text", std::string(text_bytes, 'x')}};
  e->input_items = Json::array();
  return e;
}

TEST(ResponseStore, LeastRecentlyUsedGoesFirst) {
  const size_t one = ResponseStore::cost("resp_a", *entry("resp_a"));
  ResponseStore store(3 * one);
  EXPECT_TRUE(store.put("resp_a", entry("resp_a")));
  EXPECT_TRUE(store.put("resp_b", entry("resp_b")));
  EXPECT_TRUE(store.put("resp_c", entry("resp_c")));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.bytes(), 3 * one);
  ASSERT_TRUE(store.get("resp_a"));  // a is now the most recent: b goes next
  EXPECT_TRUE(store.put("resp_d", entry("resp_d")));
  EXPECT_FALSE(store.get("resp_b"));
  EXPECT_TRUE(store.get("resp_a") && store.get("resp_c") && store.get("resp_d"));
  EXPECT_EQ(store.get("resp_d")->response["id"], "resp_d");
  EXPECT_EQ(store.bytes(), 3 * one);
}

TEST(ResponseStore, ByteBudget) {
  const size_t small = ResponseStore::cost("resp_s1", *entry("resp_s1"));
  ResponseStore store(4 * small);
  for (const char* id : {"resp_s1", "resp_s2", "resp_s3"}) store.put(id, entry(id));
  // A big entry evicts as many old ones as its size needs, oldest first.
  const auto big = entry("resp_b1", 2 * small);
  ASSERT_GT(ResponseStore::cost("resp_b1", *big), 2 * small);
  ASSERT_LT(ResponseStore::cost("resp_b1", *big), 3 * small);
  EXPECT_TRUE(store.put("resp_b1", big));
  EXPECT_FALSE(store.get("resp_s1"));
  EXPECT_FALSE(store.get("resp_s2"));
  EXPECT_TRUE(store.get("resp_s3"));
  EXPECT_LE(store.bytes(), store.max_bytes());
  // One larger than the whole budget is not kept, and evicts nothing.
  EXPECT_FALSE(store.put("resp_huge", entry("resp_huge", 5 * small)));
  EXPECT_FALSE(store.get("resp_huge"));
  EXPECT_TRUE(store.get("resp_s3") && store.get("resp_b1"));
  // A zero budget keeps nothing.
  ResponseStore none(0);
  EXPECT_FALSE(none.put("resp_a", entry("resp_a")));
  EXPECT_EQ(none.size(), 0u);
}

TEST(ResponseStore, DeleteAndReplace) {
  ResponseStore store(1 << 20);
  store.put("resp_a", entry("resp_a"));
  store.put("resp_b", entry("resp_b"));
  EXPECT_TRUE(store.erase("resp_a"));
  EXPECT_FALSE(store.erase("resp_a"));
  EXPECT_FALSE(store.get("resp_a"));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), ResponseStore::cost("resp_b", *entry("resp_b")));
  store.put("resp_b", entry("resp_b", 100));  // the same id again: replaced, counted once
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), ResponseStore::cost("resp_b", *entry("resp_b", 100)));
  EXPECT_TRUE(store.erase("resp_b"));
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, ConcurrentAccess) {
  const size_t one = ResponseStore::cost("resp_t0_000", *entry("resp_t0_000"));
  ResponseStore store(50 * one);
  std::atomic<int> found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, &found, t] {
      for (int i = 0; i < 2000; ++i) {
        char id[32];
        std::snprintf(id, sizeof id, "resp_t%d_%03d", t, i % 200);
        store.put(id, entry(id));
        if (auto e = store.get(id)) found += e->response["id"] == id;  // an entry is whole, whatever the others do
        if (i % 7 == 0) store.erase(id);
        EXPECT_LE(store.bytes(), store.max_bytes());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(found.load(), 0);
  EXPECT_LE(store.size(), 50u);
  EXPECT_EQ(store.bytes(), store.size() * one);
}

}  // namespace
}  // namespace corvid::server
