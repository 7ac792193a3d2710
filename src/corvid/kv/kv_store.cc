#include "corvid/kv/kv_store.h"

#include "corvid/core/error.h"

namespace corvid {

const Tensor& KvStore::head_keys(int64_t layer) const {
  fail("kv: layer ", layer, " keeps no head positions apart (no --kv-quant-start)");
}
const Tensor& KvStore::head_values(int64_t layer) const { return head_keys(layer); }
KvFormat KvStore::head_format(int64_t layer) const {
  (void)head_keys(layer);
  return {};
}

uint64_t KvStore::signature() const {
  constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;
  uint64_t h = kFnvOffset ^ static_cast<uint64_t>(keys(0).dim(0)) ^ (paged() ? 1u : 0u);
  for (int64_t l = 0; l < num_layers(); ++l) {
    const KvFormat f = format(l);
    h ^= (f.rotate_keys ? 1u : 0u) | (f.rotate_values ? 2u : 0u);
    h *= kFnvPrime;
    // The formats too: a pool of another format may be handed the freed one's addresses
    // (fp8 and q8 rows take the same bytes), and a recording's kernels are the format's.
    const bool split = head_group_of(l) >= 0;
    for (const Tensor* t : {&keys(l), &values(l), split ? &head_keys(l) : nullptr, split ? &head_values(l) : nullptr}) {
      if (!t) continue;
      for (const uint64_t part : {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t->data)),
                                  static_cast<uint64_t>(t->dtype)}) {
        h ^= part;
        h *= kFnvPrime;
      }
    }
  }
  return h;
}

}  // namespace corvid
