// The Responses API's memory (store: true): finished responses with the input items
// that led to them, so that previous_response_id can rebuild a conversation and
// GET/DELETE /v1/responses/{id} can answer. Bounded by a byte budget
// (--responses-store-mb): the least recently used responses are evicted first, and a
// response chained to an evicted one is answered as OpenAI answers an unknown id.
//
// Thread-safe: every connection's strand reads and writes it. Entries are immutable and
// shared, so a reader holds the lock only to find one, never while it uses it.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "corvid/server/request_fields.h"

namespace corvid::server {

struct StoredResponse {
  Json response;     // the response object as the client got it
  Json input_items;  // every item the model read: the chain's history, then this turn's input
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `entry` under `id` (replacing one of the same id) as the most recently used,
  // then evicts from the least recently used end until the budget holds. An entry larger
  // than the whole budget is not kept: returns false.
  bool put(const std::string& id, std::shared_ptr<const StoredResponse> entry);
  // The entry (now the most recently used), or null when unknown or evicted.
  std::shared_ptr<const StoredResponse> get(const std::string& id);
  // Returns whether there was one.
  bool erase(const std::string& id);

  size_t bytes() const;
  size_t size() const;
  size_t max_bytes() const { return max_bytes_; }

  // What an entry counts against the budget: the size of its JSON text and of the id, plus
  // a fixed allowance for the bookkeeping. Parsed JSON takes a small multiple of its text
  // in memory; the text is the measure because it is exact and the same on every build.
  static size_t cost(const std::string& id, const StoredResponse& entry);

 private:
  struct Node {
    std::string id;
    std::shared_ptr<const StoredResponse> entry;
    size_t bytes = 0;
  };
  void evict_locked();

  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Node> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Node>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace corvid::server
