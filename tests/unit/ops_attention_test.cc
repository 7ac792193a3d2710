// ops::attention against a naive double-precision softmax(q k^T) v: GQA head
// mapping, causal ranges, sliding window, single and multiple queries, long
// contexts that cross the kernel's key blocks, batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"
#include "ops_test_util.h"

namespace corvid::ops {
namespace {

using namespace corvid::testing;

struct AttnCase {
  int64_t n, heads, kv_heads, head_dim, capacity;
  std::vector<int32_t> positions;
  int64_t window;
};

std::vector<double> reference(const AttnCase& s, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, float scale) {
  std::vector<double> out(static_cast<size_t>(s.n * s.heads * s.head_dim));
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t pos = s.positions[static_cast<size_t>(i)];
    const int64_t lo = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      std::vector<double> sc;
      for (int64_t j = lo; j <= pos; ++j) {
        double d = 0;
        for (int64_t c = 0; c < s.head_dim; ++c) {
          d += static_cast<double>(q[static_cast<size_t>((i * s.heads + h) * s.head_dim + c)]) *
               k[static_cast<size_t>((j * s.kv_heads + kvh) * s.head_dim + c)];
        }
        sc.push_back(d * scale);
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < s.head_dim; ++c) {
        double acc = 0;
        for (int64_t j = lo; j <= pos; ++j) {
          acc += sc[static_cast<size_t>(j - lo)] * v[static_cast<size_t>((j * s.kv_heads + kvh) * s.head_dim + c)];
        }
        out[static_cast<size_t>((i * s.heads + h) * s.head_dim + c)] = acc / sum;
      }
    }
  }
  return out;
}

void check(const AttnCase& s, uint32_t seed) {
  const auto q = random_floats(static_cast<size_t>(s.n * s.heads * s.head_dim), seed);
  const auto k = random_floats(static_cast<size_t>(s.capacity * s.kv_heads * s.head_dim), seed + 1);
  const auto v = random_floats(static_cast<size_t>(s.capacity * s.kv_heads * s.head_dim), seed + 2);
  OwnedTensor qt = f32_tensor({s.n, s.heads, s.head_dim}, q);
  OwnedTensor kt = f32_tensor({s.capacity, s.kv_heads, s.head_dim}, k);
  OwnedTensor vt = f32_tensor({s.capacity, s.kv_heads, s.head_dim}, v);
  OwnedTensor out(DType::F32, {s.n, s.heads, s.head_dim});
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  attention(qt.tensor, kt.tensor, vt.tensor, s.positions, scale, s.window, out.tensor);
  const auto ref = reference(s, q, k, v, scale);
  for (size_t i = 0; i < ref.size(); ++i) {
    // Outputs are convex combinations of N(0,1) values: absolute 2e-5 covers float rounding.
    ASSERT_NEAR(out.ptr<float>()[i], ref[i], 2e-5) << "element " << i;
  }
  // Batch invariance: each query alone gives the same bits.
  for (int64_t i = 0; i < s.n; ++i) {
    Tensor qi(DType::F32, {1, s.heads, s.head_dim}, qt.ptr<float>() + i * s.heads * s.head_dim);
    OwnedTensor oi(DType::F32, {1, s.heads, s.head_dim});
    attention(qi, kt.tensor, vt.tensor, std::span<const int32_t>(&s.positions[static_cast<size_t>(i)], 1), scale,
              s.window, oi.tensor);
    ASSERT_TRUE(bitwise_equal(oi.ptr<float>(), out.ptr<float>() + i * s.heads * s.head_dim,
                              static_cast<size_t>(s.heads * s.head_dim)))
        << "query " << i;
  }
}

TEST(Attention, SingleQueryDecode) { check({1, 4, 4, 16, 32, {9}, 0}, 1); }

TEST(Attention, FirstPositionAttendsToItselfOnly) { check({1, 2, 1, 8, 4, {0}, 0}, 2); }

TEST(Attention, GroupedQueryHeads) { check({3, 9, 3, 64, 40, {30, 31, 32}, 0}, 3); }

TEST(Attention, PrefillCausal) {
  AttnCase s{20, 6, 2, 32, 20, {}, 0};
  for (int i = 0; i < 20; ++i) s.positions.push_back(i);
  check(s, 4);
}

TEST(Attention, SlidingWindow) {
  AttnCase s{12, 4, 2, 16, 200, {}, 5};
  for (int i = 0; i < 12; ++i) s.positions.push_back(150 + i);
  check(s, 5);
  check({1, 4, 1, 16, 200, {3}, 5}, 6);  // window longer than the history
}

TEST(Attention, LongContextCrossesKeyBlocks) { check({2, 4, 2, 64, 300, {254, 299}, 0}, 7); }

TEST(Attention, RejectsBadArguments) {
  OwnedTensor q(DType::F32, {1, 4, 8}), k(DType::F32, {4, 3, 8}), v(DType::F32, {4, 3, 8}), o(DType::F32, {1, 4, 8});
  std::vector<int32_t> pos = {0};
  EXPECT_THROW(attention(q.tensor, k.tensor, v.tensor, pos, 1.0f, 0, o.tensor), Error);  // 4 heads vs 3 kv heads
  OwnedTensor k2(DType::F32, {4, 2, 8}), v2(DType::F32, {4, 2, 8});
  std::vector<int32_t> far = {4};
  EXPECT_THROW(attention(q.tensor, k2.tensor, v2.tensor, far, 1.0f, 0, o.tensor), Error);  // beyond capacity
  std::vector<int32_t> two = {0, 1};
  EXPECT_THROW(attention(q.tensor, k2.tensor, v2.tensor, two, 1.0f, 0, o.tensor), Error);
  EXPECT_NO_THROW(attention(q.tensor, k2.tensor, v2.tensor, pos, 1.0f, 0, o.tensor));
}

}  // namespace
}  // namespace corvid::ops
