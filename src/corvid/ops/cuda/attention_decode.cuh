// Split-KV decode attention (attention_decode.cu), used by attention.cu for calls of
// fewer than kPrefillMinQueries queries. Internal to ops/cuda.
#pragma once

#include <cstdint>

#include "corvid/core/tensor.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/kv_rows.cuh"

namespace corvid::ops::cuda {

// The fp32 attention of q [n, heads, head_dim] over the rows kv places in k_cache /
// v_cache ([rows, kv_heads, head_dim]); pos: the queries' positions on the device;
// extent: the most rows a query could see (sets the split count, so that a recorded
// step replays at any position); lse: null, or [n, heads] on the device (ops::attention's).
// False, with nothing launched, for head sizes other than 64, 128 and 256 (the caller's
// general kernels run those).
template <class Kv>
bool attention_decode(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                      const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                      float* lse = nullptr);

// attention_decode over a coded cache (q8 / q4 / fp8, kv_codec.cuh), codes decoded in
// registers (attention_decode_coded.cu); false, with nothing launched, for a plain cache or
// head sizes other than 64, 128 and 256.
template <class Kv>
bool attention_decode_coded(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Kv& kv,
                            const int32_t* pos, int64_t extent, float scale, int64_t window, const Tensor& out,
                            float* lse = nullptr);

// How many blocks share one head group's keys (blocks_per_split blocks each): as many as
// the GPU holds at once, resident_per_sm a multiprocessor, no more than the extent has
// 32-key tiles, at most attention_combine's 128.
int decode_split_count(const Context& ctx, int64_t blocks_per_split, int64_t extent, int resident_per_sm);

// One decode query's new key and value as the q/k/v projection wrote them (k not yet
// rotated), the rotation, and the caches attention_decode_rope stores them in.
struct NewKvRow {
  const float* k = nullptr;  // [kv_heads, head_dim]
  const float* v = nullptr;
  const float* inv_freq = nullptr;  // half frequencies on the device
  float attention_factor = 1.0f;
  int half = 0;  // rotated pairs per head (rotary_dim / 2)
  bool interleaved = false;
  void* k_cache = nullptr;  // the caches' elements, written at row `position`
  void* v_cache = nullptr;
};

// attention_decode of one query (q [1, heads, head_dim] not yet rotated) over a
// contiguous cache whose row pos[0] this call fills: the kernel rotates q and the new key
// itself, the block that attends to that row stores the row, and the others read only
// older rows, so rope_store_kv's launch (and the step's wait for it) goes away. q is left
// as given. Only where attention_decode_rope_supported says so.
bool attention_decode_rope_supported(const Tensor& q, const Tensor& k_cache);
void attention_decode_rope(Context& ctx, const Tensor& q, const NewKvRow& row, const Tensor& k_cache,
                           const Tensor& v_cache, const int32_t* pos, float scale, int64_t window, const Tensor& out);

// out [n, heads, head_dim] from the splits' partial rows (attention.cu): row (query t,
// head h, split s) at partial + ((t * heads + h) * splits + s) * (head_dim + 2) holds
// the split's running max, running sum and unnormalised output.
void attention_combine(Context& ctx, const float* partial, const Tensor& out, int splits, float* lse = nullptr);

}  // namespace corvid::ops::cuda
