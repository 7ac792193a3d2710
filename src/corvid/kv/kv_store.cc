#include "corvid/kv/kv_store.h"

namespace corvid {

uint64_t KvStore::signature() const {
  constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;
  uint64_t h = kFnvOffset ^ static_cast<uint64_t>(keys(0).dim(0)) ^ (paged() ? 1u : 0u);
  for (int64_t l = 0; l < num_layers(); ++l) {
    for (const void* p : {keys(l).data, values(l).data}) {
      h ^= reinterpret_cast<uintptr_t>(p);
      h *= kFnvPrime;
    }
  }
  return h;
}

}  // namespace corvid
