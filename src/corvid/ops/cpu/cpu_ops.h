// The CPU backend of ops:: (see ops/ops.h for the contracts). ops.cc checks
// shapes and dtypes before calling these, so they assume valid arguments.
#pragma once

#include <cstdint>
#include <span>

#include "corvid/core/tensor.h"
#include "corvid/core/thread_pool.h"
#include "corvid/ops/moe.h"
#include "corvid/ops/ops.h"

namespace corvid::ops::cpu {

void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out);
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias);
// The same on a given pool (tests check that results do not depend on the thread count).
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias, ThreadPool& pool);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out);
void gelu(const Tensor& x);
void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params);
void store_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> rows, const Tensor& k_cache,
              const Tensor& v_cache);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Tensor& x, const Tensor& y);
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void scale(const Tensor& x, float s);
void softcap(const Tensor& x, float cap);
void hadamard_rotate(const Tensor& x, bool inverse);
void gather_columns(const Tensor& x, int64_t offset, const Tensor& out);
void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> positions,
               float scale, int64_t window, const Tensor& out, const Tensor* lse);
void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     std::span<const int32_t> positions, float scale, int64_t window, const Tensor& out,
                     const Tensor* lse);
void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse);
void softmax(const Tensor& x);
void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids);
void moe_experts(const Tensor& x, const Experts& experts, const Tensor& ids, const Tensor& weights,
                 GatedActivation act, const MoeScratch& scratch, const Tensor& out);
void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out);

// Tests: make matmul use the scalar reference kernels instead of SIMD.
void set_force_scalar(bool on);

// Row `r` of any weight dtype (F32/F16/BF16/block formats) as floats; k = row length.
void dequantize_row(DType t, const void* src, float* dst, int64_t k);

}  // namespace corvid::ops::cpu
