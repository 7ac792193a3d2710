// Coded KV caches (q8 / q4 affine and fp8, ops/kv_codec.h) on the GPU against the CPU:
// - store_kv and rope_store_kv write the CPU's bytes exactly (the stores repeat the CPU's
//   arithmetic, kv_store_coded.cu), with extreme and degenerate groups among random ones;
// - hadamard_rotate (--kv-rotate) gives the CPU's bits;
// - attention over the same codes, contiguous and paged, decode and prefill, matches the
//   CPU's attention over them: relative error <= 1e-5 where the GPU runs fp32 kernels
//   (decode, Exact prompts), <= 2e-2 for the tensor-core prefill (bf16 q/k/v/P), as
//   for the plain caches (cuda_batched_test.cc);
// - the engine's batched steps over a coded pool on the GPU (Exact numerics, preemption
//   included) give the CPU session's greedy tokens over a cache of the same format.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/kv/kv_format.h"
#include "corvid/ops/kv_codec.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "engine_runs.h"
#include "fixture_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using namespace corvid::testing;

constexpr DType kFormats[] = {DType::A8G64, DType::A4G64, DType::A8G32, DType::A4G32,
                              DType::F8G64, DType::T4G64, DType::T3G64, DType::T2G64};

// The bytes of a tensor on either device.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  copy_bytes(out.data(), Device::CPU, t.data, t.device, out.size());
  return out;
}

// A zeroed coded cache on `device`.
DeviceTensor zero_cache(Device device, DType t, int64_t rows, int64_t kv_heads, int64_t d) {
  DeviceTensor c(device, t, {rows, kv_heads, d});
  const std::vector<uint8_t> zeros(c.tensor.nbytes(), 0);
  copy_bytes(c.tensor.data, device, zeros.data(), Device::CPU, zeros.size());
  return c;
}

// Random keys and values with the groups a codec can get wrong mixed in: all zeros, one
// huge value among small ones, all equal, a negative extreme, values past fp8's 448 after
// scaling (none: the scale keeps them in range) and tiny (fp8 subnormal) ones.
std::vector<float> awkward_values(int64_t count, int64_t group, uint32_t seed) {
  std::vector<float> v = random_floats(static_cast<size_t>(count), seed, 3.0f);
  for (int64_t g = 0; g * group < count; ++g) {
    float* x = v.data() + g * group;
    switch (g % 7) {
      case 1: std::fill(x, x + group, 0.0f); break;
      case 2: x[group / 3] = 5000.0f; break;
      case 3: std::fill(x, x + group, -0.75f); break;
      case 4: x[group - 1] = -40.0f; break;
      case 5:
        for (int64_t i = 0; i < group; ++i) x[i] *= 1e-5f;
        break;
      default: break;
    }
  }
  return v;
}

TEST(CudaCodedKv, StoreKvWritesTheCpusBytes) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 7, kv_heads = 2, d = 128, rows = 13;
  const std::vector<int32_t> slots = {9, 0, 3, -1, 5, 12, 1};  // -1: not stored
  for (const DType t : kFormats) {
    const int64_t group = ops::kv_codec::group_values(t);
    OwnedTensor k = f32_tensor({n, kv_heads, d}, awkward_values(n * kv_heads * d, group, 3));
    OwnedTensor v = f32_tensor({n, kv_heads, d}, awkward_values(n * kv_heads * d, group, 4));
    DeviceTensor kc = zero_cache(Device::CPU, t, rows, kv_heads, d), vc = zero_cache(Device::CPU, t, rows, kv_heads, d);
    ops::store_kv(k.tensor, v.tensor, slots, kc.tensor, vc.tensor);
    DeviceTensor gk = to_gpu(k.tensor), gv = to_gpu(v.tensor);
    DeviceTensor gkc = zero_cache(Device::CUDA, t, rows, kv_heads, d), gvc = zero_cache(Device::CUDA, t, rows, kv_heads, d);
    ops::store_kv(gk.tensor, gv.tensor, slots, gkc.tensor, gvc.tensor);
    EXPECT_EQ(bytes_of(gkc.tensor), bytes_of(kc.tensor)) << dtype_name(t) << " keys";
    EXPECT_EQ(bytes_of(gvc.tensor), bytes_of(vc.tensor)) << dtype_name(t) << " values";
  }
}

// rope_store_kv on the GPU rotates k in place and stores the codes of the rotated keys:
// the CPU's store of the GPU's rotated k gives the same bytes.
TEST(CudaCodedKv, RopeStoreKvStoresTheRotatedKeysCodes) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 20, heads = 4, kv_heads = 2, d = 64, rows = 24;  // 20 tokens: the prompt kernel
  ops::RopeParams rope;
  rope.rotary_dim = 64;
  rope.inv_freq.resize(32);
  for (int i = 0; i < 32; ++i) rope.inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / 64.0f);
  std::vector<int32_t> positions(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(100 + i);
    slots[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % rows);
  }
  for (const int64_t tokens : {int64_t{1}, n}) {  // a decode step and a prompt
    for (const DType t : kFormats) {
      OwnedTensor q = f32_tensor({tokens, heads, d}, random_floats(static_cast<size_t>(tokens * heads * d), 5));
      OwnedTensor k = f32_tensor({tokens, kv_heads, d}, random_floats(static_cast<size_t>(tokens * kv_heads * d), 6));
      OwnedTensor v = f32_tensor({tokens, kv_heads, d}, random_floats(static_cast<size_t>(tokens * kv_heads * d), 7));
      DeviceTensor gq = to_gpu(q.tensor), gk = to_gpu(k.tensor), gv = to_gpu(v.tensor);
      DeviceTensor gkc = zero_cache(Device::CUDA, t, rows, kv_heads, d),
                   gvc = zero_cache(Device::CUDA, t, rows, kv_heads, d);
      const std::vector<int32_t> pos(positions.begin(), positions.begin() + tokens);
      const std::vector<int32_t> at(slots.begin(), slots.begin() + tokens);
      ops::rope_store_kv(gq.tensor, gk.tensor, gv.tensor, pos, rope, at, gkc.tensor, gvc.tensor);
      OwnedTensor rotated = f32_tensor({tokens, kv_heads, d}, to_host(gk.tensor));
      DeviceTensor kc = zero_cache(Device::CPU, t, rows, kv_heads, d), vc = zero_cache(Device::CPU, t, rows, kv_heads, d);
      ops::store_kv(rotated.tensor, v.tensor, at, kc.tensor, vc.tensor);
      EXPECT_EQ(bytes_of(gkc.tensor), bytes_of(kc.tensor)) << dtype_name(t) << ", " << tokens << " tokens: keys";
      EXPECT_EQ(bytes_of(gvc.tensor), bytes_of(vc.tensor)) << dtype_name(t) << ", " << tokens << " tokens: values";
      // And the rotation itself is the CPU's (to fp32 rounding of the trigonometry).
      ops::rope(k.tensor, pos, rope);
      EXPECT_LE(rel_err(to_host(gk.tensor), k.ptr<float>(), static_cast<size_t>(k.tensor.numel())), 1e-5)
          << dtype_name(t) << ", " << tokens << " tokens";
    }
  }
}

TEST(CudaCodedKv, HadamardRotationIsTheCpus) {
  SKIP_WITHOUT_GPU();
  for (const int64_t d : {int64_t{64}, int64_t{128}, int64_t{256}}) {
    OwnedTensor x = f32_tensor({9, 3, d}, random_floats(static_cast<size_t>(27 * d), 8, 4.0f));
    DeviceTensor gx = to_gpu(x.tensor);
    ops::hadamard_rotate(x.tensor);
    ops::hadamard_rotate(gx.tensor);
    const std::vector<float> got = to_host(gx.tensor);
    EXPECT_TRUE(bitwise_equal(got.data(), x.ptr<float>(), got.size())) << "head_dim " << d;
    // And the inverse (TurboQuant's outputs back from the rotated basis).
    ops::hadamard_unrotate(x.tensor);
    ops::hadamard_unrotate(gx.tensor);
    const std::vector<float> back = to_host(gx.tensor);
    EXPECT_TRUE(bitwise_equal(back.data(), x.ptr<float>(), back.size())) << "head_dim " << d << ", inverse";
  }
}

struct AttentionCase {
  int64_t heads, kv_heads, head_dim;
};

// Queries at the end of a 300-token history (one decode query, a 3-query append, a
// 40-query prompt chunk) over a contiguous cache and over the same rows scattered in a
// paged pool, in both numerics, with and without a window.
void check_attention(const AttentionCase& c, DType t, DType tv, ops::QuantizedMatmul mode) {
  NumericsScope numerics(mode);
  const int64_t len = 300, block = 16, d = c.head_dim;
  OwnedTensor k = f32_tensor({len, c.kv_heads, d}, random_floats(static_cast<size_t>(len * c.kv_heads * d), 21, 1.5f));
  OwnedTensor v = f32_tensor({len, c.kv_heads, d}, random_floats(static_cast<size_t>(len * c.kv_heads * d), 22, 1.5f));
  // Paged rows: position p in block table[p / block] of a shuffled pool.
  const int64_t blocks = (len + block - 1) / block, pool_blocks = blocks + 4;
  std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
  const std::vector<int32_t> table(ids.begin(), ids.begin() + blocks);
  std::vector<int32_t> contiguous(static_cast<size_t>(len)), slots(static_cast<size_t>(len));
  for (int64_t p = 0; p < len; ++p) {
    contiguous[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    slots[static_cast<size_t>(p)] = table[static_cast<size_t>(p / block)] * static_cast<int32_t>(block) +
                                    static_cast<int32_t>(p % block);
  }
  DeviceTensor kc = zero_cache(Device::CPU, t, len, c.kv_heads, d), vc = zero_cache(Device::CPU, tv, len, c.kv_heads, d);
  DeviceTensor kp = zero_cache(Device::CPU, t, pool_blocks * block, c.kv_heads, d),
               vp = zero_cache(Device::CPU, tv, pool_blocks * block, c.kv_heads, d);
  ops::store_kv(k.tensor, v.tensor, contiguous, kc.tensor, vc.tensor);
  ops::store_kv(k.tensor, v.tensor, slots, kp.tensor, vp.tensor);
  DeviceTensor gkc = to_gpu(kc.tensor), gvc = to_gpu(vc.tensor), gkp = to_gpu(kp.tensor), gvp = to_gpu(vp.tensor);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (const int64_t queries : {int64_t{1}, int64_t{3}, int64_t{40}}) {
    std::vector<int32_t> pos(static_cast<size_t>(queries));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(len - queries));
    OwnedTensor q = f32_tensor({queries, c.heads, d}, random_floats(static_cast<size_t>(queries * c.heads * d), 23));
    DeviceTensor gq = to_gpu(q.tensor);
    const bool tensor_cores = mode == ops::QuantizedMatmul::Fast && queries >= 16;
    const double tol = tensor_cores ? 2e-2 : 1e-5;
    for (const int64_t window : {int64_t{0}, int64_t{100}}) {
      OwnedTensor want(DType::F32, {queries, c.heads, d});
      ops::attention(q.tensor, kc.tensor, vc.tensor, pos, scale, window, want.tensor);
      DeviceTensor got(Device::CUDA, DType::F32, {queries, c.heads, d});
      ops::attention(gq.tensor, gkc.tensor, gvc.tensor, pos, scale, window, got.tensor);
      EXPECT_LE(rel_err(to_host(got.tensor), want.ptr<float>(), static_cast<size_t>(want.tensor.numel())), tol)
          << dtype_name(t) << "/" << dtype_name(tv) << " contiguous, " << queries << " queries, window " << window << ", head_dim " << d;
      const std::vector<int32_t> query_seq(static_cast<size_t>(queries), 0);
      const ops::PagedKV paged{block, table, blocks, query_seq};
      DeviceTensor got_paged(Device::CUDA, DType::F32, {queries, c.heads, d});
      ops::paged_attention(gq.tensor, gkp.tensor, gvp.tensor, paged, pos, scale, window, got_paged.tensor);
      EXPECT_LE(rel_err(to_host(got_paged.tensor), want.ptr<float>(), static_cast<size_t>(want.tensor.numel())), tol)
          << dtype_name(t) << "/" << dtype_name(tv) << " paged, " << queries << " queries, window " << window << ", head_dim " << d;
    }
  }
}

TEST(CudaCodedKv, AttentionOverCodesMatchesTheCpus) {
  SKIP_WITHOUT_GPU();
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast})
    for (const auto& [t, tv] : std::vector<std::pair<DType, DType>>{
             {DType::A8G64, DType::A8G64}, {DType::A4G64, DType::A4G64}, {DType::A8G32, DType::A8G32},
             {DType::A4G32, DType::A4G32}, {DType::F8G64, DType::F8G64}, {DType::T4G64, DType::T4G64},
             {DType::T2G64, DType::T2G64}, {DType::A8G64, DType::T3G64}, {DType::T4G64, DType::T3G64},
             {DType::T3G64, DType::T2G64}}) {  // TurboQuant's pairs of two formats too
      check_attention({8, 2, 64}, t, tv, mode);
      check_attention({4, 4, 128}, t, tv, mode);  // MHA
      check_attention({8, 1, 256}, t, tv, mode);  // Gemma's heads
    }
}

// The delayed switch's two parts on the GPU (a bf16 head of `split` positions, a coded
// tail) merged, against the CPU's merge of the same values (the head rounded to bf16
// first, kept in f32): queries before, at and after the switch; contiguous and paged;
// decode, append and prompt kernels. Also each part's lse.
void check_split_attention(DType t, DType tv, ops::QuantizedMatmul mode) {
  NumericsScope numerics(mode);
  const int64_t heads = 8, kv_heads = 2, d = 64, len = 300, split = 48, block = 16;
  const int64_t tail = len - split, row = kv_heads * d;
  std::vector<float> kvals = random_floats(static_cast<size_t>(len * row), 31, 1.5f);
  std::vector<float> vvals = random_floats(static_cast<size_t>(len * row), 32, 1.5f);
  auto to_bf16 = [](float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&x, &b, 4);
    return x;
  };
  for (int64_t i = 0; i < split * row; ++i) {
    kvals[static_cast<size_t>(i)] = to_bf16(kvals[static_cast<size_t>(i)]);
    vvals[static_cast<size_t>(i)] = to_bf16(vvals[static_cast<size_t>(i)]);
  }
  auto part = [&](const std::vector<float>& x, int64_t from, int64_t to) {
    return f32_tensor({to - from, kv_heads, d}, std::vector<float>(x.begin() + from * row, x.begin() + to * row));
  };
  OwnedTensor kh = part(kvals, 0, split), vh = part(vvals, 0, split);
  OwnedTensor kt = part(kvals, split, len), vt = part(vvals, split, len);
  std::vector<int32_t> tail_rows(static_cast<size_t>(tail)), head_rows(static_cast<size_t>(split));
  std::iota(tail_rows.begin(), tail_rows.end(), 0);
  std::iota(head_rows.begin(), head_rows.end(), 0);
  DeviceTensor ktc = zero_cache(Device::CPU, t, tail, kv_heads, d), vtc = zero_cache(Device::CPU, tv, tail, kv_heads, d);
  ops::store_kv(kt.tensor, vt.tensor, tail_rows, ktc.tensor, vtc.tensor);
  DeviceTensor gkh = zero_cache(Device::CUDA, DType::BF16, split, kv_heads, d),
               gvh = zero_cache(Device::CUDA, DType::BF16, split, kv_heads, d);
  DeviceTensor gk_rows = to_gpu(kh.tensor), gv_rows = to_gpu(vh.tensor);
  ops::store_kv(gk_rows.tensor, gv_rows.tensor, head_rows, gkh.tensor, gvh.tensor);
  DeviceTensor gkt = to_gpu(ktc.tensor), gvt = to_gpu(vtc.tensor);
  const float scale = 0.125f;
  // Queries: a decode step before the switch, one after; an append across it; a prompt
  // chunk from 20 to 59 (the tensor-core kernel in Fast numerics).
  const std::vector<std::vector<int32_t>> cases = {{10}, {299}, {46, 47, 48}, {}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    std::vector<int32_t> pos = cases[ci];
    if (pos.empty())
      for (int32_t p = 20; p < 60; ++p) pos.push_back(p);
    const int64_t n = static_cast<int64_t>(pos.size());
    std::vector<int32_t> hp, tp;
    for (int32_t p : pos) {
      hp.push_back(std::min<int32_t>(p, split - 1));
      tp.push_back(p - static_cast<int32_t>(split));
    }
    OwnedTensor q = f32_tensor({n, heads, d}, random_floats(static_cast<size_t>(n * heads * d), 33 + ci));
    OwnedTensor want(DType::F32, {n, heads, d}), other(DType::F32, {n, heads, d});
    OwnedTensor lse(DType::F32, {n, heads}), other_lse(DType::F32, {n, heads});
    ops::attention(q.tensor, kh.tensor, vh.tensor, hp, scale, 0, want.tensor, &lse.tensor);
    ops::attention(q.tensor, ktc.tensor, vtc.tensor, tp, scale, 0, other.tensor, &other_lse.tensor);
    ops::merge_attention(want.tensor, lse.tensor, other.tensor, other_lse.tensor);
    const bool tensor_cores = mode == ops::QuantizedMatmul::Fast && n >= 16;
    const double tol = tensor_cores ? 2e-2 : 1e-5;
    DeviceTensor gq = to_gpu(q.tensor);
    for (const bool paged : {false, true}) {
      DeviceTensor got(Device::CUDA, DType::F32, {n, heads, d}), got_other(Device::CUDA, DType::F32, {n, heads, d});
      DeviceTensor glse(Device::CUDA, DType::F32, {n, heads}), glse_other(Device::CUDA, DType::F32, {n, heads});
      if (!paged) {
        ops::attention(gq.tensor, gkh.tensor, gvh.tensor, hp, scale, 0, got.tensor, &glse.tensor);
        ops::attention(gq.tensor, gkt.tensor, gvt.tensor, tp, scale, 0, got_other.tensor, &glse_other.tensor);
      } else {
        // Each part's rows in blocks of 16 in the order given (the rows are the cache's):
        // the tables are the identity, the pools the contiguous caches.
        std::vector<int32_t> head_table(static_cast<size_t>(split / block)), tail_table(static_cast<size_t>(
                                                                                 (tail + block - 1) / block));
        std::iota(head_table.begin(), head_table.end(), 0);
        std::iota(tail_table.begin(), tail_table.end(), 0);
        const std::vector<int32_t> query_seq(static_cast<size_t>(n), 0);
        const ops::PagedKV ph{block, head_table, static_cast<int64_t>(head_table.size()), query_seq};
        const int64_t tail_rows_padded = static_cast<int64_t>(tail_table.size()) * block;
        DeviceTensor pkt = zero_cache(Device::CPU, t, tail_rows_padded, kv_heads, d),
                     pvt = zero_cache(Device::CPU, tv, tail_rows_padded, kv_heads, d);
        ops::store_kv(kt.tensor, vt.tensor, tail_rows, pkt.tensor, pvt.tensor);
        DeviceTensor gpkt = to_gpu(pkt.tensor), gpvt = to_gpu(pvt.tensor);
        const ops::PagedKV pt{block, tail_table, static_cast<int64_t>(tail_table.size()), query_seq};
        ops::paged_attention(gq.tensor, gkh.tensor, gvh.tensor, ph, hp, scale, 0, got.tensor, &glse.tensor);
        ops::paged_attention(gq.tensor, gpkt.tensor, gpvt.tensor, pt, tp, scale, 0, got_other.tensor,
                             &glse_other.tensor);
      }
      // Each part's lse where it saw keys; -inf where it saw none.
      const std::vector<float> l1 = to_host(glse.tensor), l2 = to_host(glse_other.tensor);
      for (int64_t i = 0; i < n * heads; ++i) {
        EXPECT_NEAR(l1[static_cast<size_t>(i)], lse.ptr<float>()[i], tensor_cores ? 2e-2 : 1e-4) << i;
        if (other_lse.ptr<float>()[i] == -INFINITY) EXPECT_EQ(l2[static_cast<size_t>(i)], -INFINITY) << i;
        else EXPECT_NEAR(l2[static_cast<size_t>(i)], other_lse.ptr<float>()[i], tensor_cores ? 2e-2 : 1e-4) << i;
      }
      ops::merge_attention(got.tensor, glse.tensor, got_other.tensor, glse_other.tensor);
      EXPECT_LE(rel_err(to_host(got.tensor), want.ptr<float>(), static_cast<size_t>(want.tensor.numel())), tol)
          << dtype_name(t) << "/" << dtype_name(tv) << (paged ? " paged, " : " contiguous, ") << "case " << ci;
    }
  }
}

TEST(CudaCodedKv, DelayedSwitchPartsMergeAsTheCpus) {
  SKIP_WITHOUT_GPU();
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Exact, ops::QuantizedMatmul::Fast})
    for (const auto& [t, tv] : std::vector<std::pair<DType, DType>>{
             {DType::A8G64, DType::A8G64}, {DType::F8G64, DType::F8G64}, {DType::A8G64, DType::T3G64}})
      check_split_attention(t, tv, mode);
}

// The engine on the GPU with the delayed switch (an f32 head, so that it holds the CPU's
// values; then the default bf16 head runs too), batched, against a CPU session alone.
TEST(CudaCodedKv, DelayedSwitchBatchedGreedyEqualsTheCpuSessionAlone) {
  SKIP_WITHOUT_GPU();
  NumericsScope numerics(ops::QuantizedMatmul::Exact);
  const std::string path = (fixtures::fixtures_dir() / "llama_hd64").string();
  LoadedModel cpu = LoadedModel::load(path);
  LoadedModel gpu = LoadedModel::load(path, Device::CUDA);
  const auto prompts = fixtures::random_prompts(6, 17, 25, static_cast<int32_t>(cpu.model->config().vocab_size));
  for (const KvFormat& t : {KvFormat(DType::A8G64), *kv_format_from_name("turbo:k8v3")}) {
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(fixtures::greedy(*cpu.runner, p, 16, t, {}, 8));
    fixtures::expect_batched_equals_alone(*gpu.runner, nullptr, prompts, alone, 16, t, 8, DType::F32);
    EngineConfig c;
    c.num_blocks = 64;
    c.block_size = 4;
    c.kv_format = t;
    c.kv_quant_start = 8;  // bf16 head
    Engine engine(*gpu.runner, nullptr, c);
    const auto got = fixtures::engine_greedy(engine, prompts, 16);
    size_t same = 0;
    for (size_t i = 0; i < prompts.size(); ++i) same += got[i] == alone[i];
    EXPECT_GE(same, prompts.size() / 2) << kv_format_name(t) << ": a bf16 head rounds, but most runs agree";
    engine.shutdown();
  }
}

// The engine on the GPU over a coded pool, batched (a roomy pool and one that preempts),
// against a CPU session alone over a cache of the same format, in Exact numerics.
TEST(CudaCodedKv, BatchedGreedyOnTheGpuEqualsTheCpuSessionAlone) {
  SKIP_WITHOUT_GPU();
  NumericsScope numerics(ops::QuantizedMatmul::Exact);
  const std::string path = (fixtures::fixtures_dir() / "llama_hd64").string();
  LoadedModel cpu = LoadedModel::load(path);
  LoadedModel gpu = LoadedModel::load(path, Device::CUDA);
  const auto prompts = fixtures::random_prompts(6, 17, 25, static_cast<int32_t>(cpu.model->config().vocab_size));
  for (const KvFormat& t : {KvFormat(DType::F8G64), KvFormat(DType::A8G64), KvFormat(DType::A4G32),
                            *kv_format_from_name("turbo:k8v3"), *kv_format_from_name("turbo:k4v3")}) {
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(fixtures::greedy(*cpu.runner, p, 16, t));
    fixtures::expect_batched_equals_alone(*gpu.runner, nullptr, prompts, alone, 16, t);
  }
}

}  // namespace
}  // namespace corvid
