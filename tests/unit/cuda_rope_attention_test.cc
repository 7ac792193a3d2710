// ops::rope_store_kv_attention on the GPU: one decode query whose attention kernel rotates
// q and the new key itself and stores the new row (attention_decode.cu, kRope), against
// the two ops it replaces (rope_store_kv, then attention) on the GPU and, for an F32
// cache, the CPU. Runs only in builds with -DCORVID_CUDA=ON and skips without a GPU.
//
// Tolerances: the kernels share their arithmetic (rope.cuh; the same attention kernel),
// so outputs must agree with the two-op path to 1e-6 and with the CPU to 1e-5 (relative
// to max |reference|, fp32 rounding). Cache rows other than the new one must be
// untouched (byte for byte); the new row must hold the same rotated key and value
// (1e-6 relative in F32, one rounding of a 16-bit cache: 1e-2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/half.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::kv_to_gpu;
using testing::random_floats;
using testing::rel_err;
using testing::to_gpu;
using testing::to_host;

ops::RopeParams rope_params(int rotary_dim, bool interleaved, float attention_factor) {
  ops::RopeParams p;
  for (int i = 0; i < rotary_dim / 2; ++i)
    p.inv_freq.push_back(std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(rotary_dim)));
  p.rotary_dim = rotary_dim;
  p.interleaved = interleaved;
  p.attention_factor = attention_factor;
  return p;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  copy_bytes(out.data(), Device::CPU, t.data, t.device, out.size());
  return out;
}

// Element i of a cache's bytes as a float.
float cache_value(const std::vector<uint8_t>& bytes, DType t, size_t i) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

struct Case {
  int64_t heads, kv_heads, head_dim;
  int rotary_dim;
  bool interleaved;
  float attention_factor;
  int64_t window;
};

// The fused op and the two ops from the same inputs; the checks above. fused_expected:
// whether the one-kernel path applies (q then stays unrotated).
void check_case(const Case& c, DType kv, int32_t pos, bool fused_expected, uint32_t seed) {
  const int64_t cap = 2000, D = c.head_dim;
  const ops::RopeParams rope = rope_params(c.rotary_dim, c.interleaved, c.attention_factor);
  const auto qv = random_floats(static_cast<size_t>(c.heads * D), seed);
  const auto kv_new = random_floats(static_cast<size_t>(c.kv_heads * D), seed + 1);
  const auto vv_new = random_floats(static_cast<size_t>(c.kv_heads * D), seed + 2);
  const size_t cache_values = static_cast<size_t>(cap * c.kv_heads * D);
  OwnedTensor keys = f32_tensor({cap, c.kv_heads, D}, random_floats(cache_values, seed + 3));
  OwnedTensor values = f32_tensor({cap, c.kv_heads, D}, random_floats(cache_values, seed + 4));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const std::vector<int32_t> positions{pos};

  std::vector<float> outs[2], q_after[2];
  std::vector<uint8_t> k_caches[2], v_caches[2];
  for (int fused = 0; fused < 2; ++fused) {
    DeviceTensor q = to_gpu(f32_tensor({1, c.heads, D}, qv).tensor);
    DeviceTensor k = to_gpu(f32_tensor({1, c.kv_heads, D}, kv_new).tensor);
    DeviceTensor v = to_gpu(f32_tensor({1, c.kv_heads, D}, vv_new).tensor);
    DeviceTensor k_cache = kv_to_gpu(keys, kv), v_cache = kv_to_gpu(values, kv);
    DeviceTensor out(Device::CUDA, DType::F32, {1, c.heads, D});
    if (fused) {
      ops::rope_store_kv_attention(q.tensor, k.tensor, v.tensor, positions, rope, k_cache.tensor, v_cache.tensor, scale,
                                   c.window, out.tensor);
    } else {
      ops::rope_store_kv(q.tensor, k.tensor, v.tensor, positions, rope, positions, k_cache.tensor, v_cache.tensor);
      ops::attention(q.tensor, k_cache.tensor, v_cache.tensor, positions, scale, c.window, out.tensor);
    }
    outs[fused] = to_host(out.tensor);
    q_after[fused] = to_host(q.tensor);
    k_caches[fused] = bytes_of(k_cache.tensor);
    v_caches[fused] = bytes_of(v_cache.tensor);
  }
  const std::string what = std::string(dtype_name(kv)) + " head_dim " + std::to_string(D) + " heads " +
                           std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " rotary " +
                           std::to_string(c.rotary_dim) + (c.interleaved ? " interleaved" : "") + " pos " +
                           std::to_string(pos) + " window " + std::to_string(c.window);
  EXPECT_LE(rel_err(outs[1], outs[0].data(), outs[0].size()), 1e-6) << what;
  // q: the fused kernel leaves it as given; the fallback rotates it (rope_store_kv).
  EXPECT_EQ(q_after[1] == qv, fused_expected) << what;

  const size_t row = static_cast<size_t>(c.kv_heads * D), esize = kv == DType::F32 ? 4 : 2;
  const size_t at = static_cast<size_t>(pos) * row * esize;
  const double tol = kv == DType::F32 ? 1e-6 : 1e-2;
  for (const auto* caches : {k_caches, v_caches}) {
    const std::vector<uint8_t>& a = caches[0];
    const std::vector<uint8_t>& b = caches[1];
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), at), 0) << what << ": rows before the new one changed";
    EXPECT_EQ(std::memcmp(a.data() + at + row * esize, b.data() + at + row * esize, a.size() - at - row * esize), 0)
        << what << ": rows after the new one changed";
    double worst = 0, big = 0;
    for (size_t i = 0; i < row; ++i) {
      const size_t e = static_cast<size_t>(pos) * row + i;
      const float x = cache_value(a, kv, e), y = cache_value(b, kv, e);
      worst = std::max(worst, static_cast<double>(std::fabs(x - y)));
      big = std::max(big, static_cast<double>(std::fabs(x)));
    }
    EXPECT_LE(worst, tol * big) << what << ": the new row";
  }

  if (kv == DType::F32) {  // the CPU's two ops
    OwnedTensor q = f32_tensor({1, c.heads, D}, qv), k = f32_tensor({1, c.kv_heads, D}, kv_new);
    OwnedTensor v = f32_tensor({1, c.kv_heads, D}, vv_new), out(DType::F32, {1, c.heads, D});
    ops::rope_store_kv_attention(q.tensor, k.tensor, v.tensor, positions, rope, keys.tensor, values.tensor, scale,
                                 c.window, out.tensor);
    EXPECT_LE(rel_err(outs[1], out.ptr<float>(), outs[1].size()), 1e-5) << what << " (CPU)";
  }
}

TEST(CudaRopeAttention, OneKernelEqualsRopeStoreKvThenAttention) {
  SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {32, 8, 128, 128, false, 1.0f, 0},   // Llama-3.1-8B: groups of 4
      {8, 8, 64, 64, true, 1.0f, 0},       // interleaved pairs, no GQA
      {16, 2, 256, 128, false, 1.25f, 0},  // half the dims rotate, groups of 8, a yarn-style factor
      {8, 2, 128, 128, false, 1.0f, 300},  // sliding window
  };
  uint32_t seed = 700;
  for (const Case& c : cases)
    for (DType kv : {DType::F32, DType::BF16, DType::F16})
      for (int32_t pos : {0, 31, 32, 700, 1999}) check_case(c, kv, pos, true, seed += 5);
  // Head sizes decode attention does not take fall back to the two ops.
  check_case({8, 2, 96, 96, false, 1.0f, 0}, DType::BF16, 40, false, seed + 5);
}

}  // namespace
}  // namespace corvid
