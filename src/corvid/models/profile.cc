#include "corvid/models/profile.h"

#include "corvid/core/error.h"
#include "corvid/ops/moe.h"
#include "corvid/ops/ops.h"

namespace corvid {

void check_profile_on(const ModelProfile& p, Device device, const std::string& source) {
  const int64_t widest = ops::max_attention_head_dim(device);
  CORVID_CHECK(p.max_head_dim <= widest, source, ": ", p.family, " needs attention over heads of ", p.max_head_dim,
               ", and the ", device_name(device), " attention kernels take at most ", widest,
               " (run it with --device cpu)");
  CORVID_CHECK(!p.routed_experts || ops::moe_supported(device), source, ": ", p.family,
               " has mixture-of-experts layers, which do not run on ", device_name(device),
               " yet (run it with --device cpu)");
}

}  // namespace corvid
