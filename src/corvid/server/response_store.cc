#include "corvid/server/response_store.h"

namespace corvid::server {

size_t ResponseStore::cost(const std::string& id, const StoredResponse& entry) {
  constexpr size_t kOverhead = 256;  // list node, map bucket, shared_ptr control block
  return id.size() + entry.response.dump().size() + entry.input_items.dump().size() + kOverhead;
}

bool ResponseStore::put(const std::string& id, std::shared_ptr<const StoredResponse> entry) {
  const size_t bytes = cost(id, *entry);  // outside the lock: it serialises the entry
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (bytes > max_bytes_) return false;
  lru_.push_front(Node{id, std::move(entry), bytes});
  index_[id] = lru_.begin();
  bytes_ += bytes;
  evict_locked();
  return true;
}

void ResponseStore::evict_locked() {
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);  // iterators stay valid
  return it->second->entry;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

}  // namespace corvid::server
