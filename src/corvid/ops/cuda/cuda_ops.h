// The CUDA backend of ops:: (contracts in ops/ops.h). A plain C++ header — no
// CUDA includes — so ops.cc and core/device.cc can call into the backend while
// everything outside ops/cuda compiles without the CUDA toolkit. ops.cc checks
// arguments before calling these; tensors are on the GPU, activations F32.
//
// Ordering: every kernel and copy runs on one stream, so ops are ordered with
// each other and with DeviceBuffer copies; only copies to the host wait.
#pragma once

#include <cstdint>
#include <span>

#include "corvid/core/device.h"
#include "corvid/core/tensor.h"
#include "corvid/ops/moe.h"
#include "corvid/ops/ops.h"
#include "corvid/ops/sampling.h"

namespace corvid::ops::cuda {

bool available();         // a GPU is usable (never throws)
// Called before every CUDA op (ops.cc) and backend copy: the ops run so far, so that an
// op can tell whether it directly follows another (context.h Int8Rows).
void count_op();
DeviceBackend& backend();  // the CUDA DeviceBackend; throws corvid::Error without a GPU

// CORVID_OP_TIMES=1 (profiling): GPU time of what runs on the stream between this
// object's construction and destruction, summed per name and printed at exit
// (op_timer.cu). Names with a '.' are parts of an op ("matmul.round"). Costs nothing
// when the variable is unset.
class OpTimer {
 public:
  explicit OpTimer(const char* name);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  const char* name_ = nullptr;
  void* start_ = nullptr;  // cudaEvent_t, kept opaque: this header has no CUDA includes
  void* end_ = nullptr;
};
void reset_op_times();  // ops::reset_op_times

// What ops.cc opens around each CUDA op: counts it (count_op) and times it (OpTimer).
struct OpScope {
  explicit OpScope(const char* name) : timer(name) { count_op(); }
  OpTimer timer;
};

void embedding(const Tensor& table, const Indices& ids, const Tensor& out);
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias);
void rearrange_weight(const Tensor& raw, const Tensor& dst);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out);
void gelu(const Tensor& x);
void rope(const Tensor& x, const Indices& positions, const RopeParams& params);
void hadamard_rotate(const Tensor& x, bool inverse);
void rope_store_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                   const RopeParams& params, const Indices& rows, const Tensor& k_cache,
                   const Tensor& v_cache);
void store_kv(const Tensor& k, const Tensor& v, const Indices& rows, const Tensor& k_cache, const Tensor& v_cache);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
// Whether matmul_glu (ops.h) runs as one GEMV (one token, a direct-load int8 format:
// gemv.h gemv_dp4a_glu_supports); then it writes out only.
bool matmul_glu_fuses(const Tensor& x, const Tensor& w, const Tensor& out);
void matmul_glu(const Tensor& x, const Tensor& w, const Tensor& out, GatedActivation act);
void add(const Tensor& x, const Tensor& y);
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void scale(const Tensor& x, float s);
void softcap(const Tensor& x, float cap);
void gather_columns(const Tensor& x, int64_t offset, const Tensor& out);
void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out);
void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& weight, float eps, const Tensor& out);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Indices& positions,
               float scale, int64_t window, const Tensor& out, const Tensor* lse);
void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse);
// Whether rope_store_kv_attention runs as one kernel (one query, decode attention's head
// sizes; not with CORVID_NO_FUSED_ROPE=1); otherwise ops.cc runs rope_store_kv + attention.
bool rope_store_kv_attention_fuses(const Tensor& q, const Tensor& k_cache);
void rope_store_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                             const RopeParams& params, const Tensor& k_cache, const Tensor& v_cache, float scale,
                             int64_t window, const Tensor& out);
void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     const Indices& positions, float scale, int64_t window, const Tensor& out, const Tensor* lse);
void softmax(const Tensor& x);
// ops/moe.h, in moe.cu (the router, the pairs' grouping and the combining) and
// moe_experts.cu (the experts' GEMVs and grouped GEMM).
void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids);
void moe_experts(const Tensor& x, const Experts& experts, const Tensor& ids, const Tensor& weights,
                 GatedActivation act, const MoeScratch& scratch, const Tensor& out);
void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out);
int64_t max_attention_head_dim();
void sample_tokens(const Tensor& logits, std::span<const TokenSampling> rows, std::span<int32_t> out);
void mask_logits(const Tensor& logits, std::span<const int32_t> rows, std::span<const int32_t> masks);

}  // namespace corvid::ops::cuda
