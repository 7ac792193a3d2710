// RMSNorm of a few wide rows on a cluster of thread blocks, and of many rows with float4
// loads (norm_cluster.cu), for elementwise.cu's rms_norm and add_rms_norm.
#pragma once

#include "corvid/core/tensor.h"

namespace corvid::ops::cuda {

// x += *y first when y is given; then out = rms_norm(x, weight, eps). Returns false, having
// done nothing, when the rows do not suit it (more than a few rows, a width that is not
// a multiple of 4 or over 16384, unaligned data) or CORVID_NO_CLUSTER_NORM=1.
bool rms_norm_cluster(const Tensor& x, const Tensor* y, const Tensor& weight, float eps, const Tensor& out);
// The same for any number of rows up to 8192 wide, one block a row (prompts); false, having
// done nothing, for other widths or unaligned data.
bool rms_norm_rows(const Tensor& x, const Tensor* y, const Tensor& weight, float eps, const Tensor& out);

}  // namespace corvid::ops::cuda
