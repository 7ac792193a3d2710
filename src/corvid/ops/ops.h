// ops: the backend-neutral operations every model is written against. Each
// function checks shapes and dtypes, then dispatches on the tensors' device to
// a backend (ops/cpu; ops/cuda in -DCORVID_CUDA=ON builds). Activations are F32;
// weights stay in their stored dtype (F32, F16, BF16 or a GGUF block format)
// and matmul works on that format directly.
//
// Shapes are outermost-first. "n" is the number of tokens in the call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "corvid/core/tensor.h"
#include "corvid/ops/indices.h"

namespace corvid::ops {

// out[n, d] = table[ids[i], :] for each i. table [vocab, d] in any weight dtype; out F32.
void embedding(const Tensor& table, const Indices& ids, const Tensor& out);

// out[n, m] = x[n, k] @ w[m, k]^T (+ bias[m] when given). x, out F32; w any weight dtype.
// Quantized w: x is quantized per row to the matching activation format (Q8_0 / Q8_K)
// and dot products run in the block format, as llama.cpp does.
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias = nullptr);

// How matmul treats block-quantized weights, process-wide (set once at start-up):
// Fast quantizes activations to 8 bits (llama.cpp's numerics, the default); Exact
// multiplies F32 activations with each weight row dequantized on the fly, which
// computes what transformers computes on the dequantized model (slower in prefill).
// On CUDA, Fast runs prompts on tensor cores (16-bit operands) and decode GEMVs of
// block-quantized weights with int8 activations per 32 values (gemv_dp4a.cu).
enum class QuantizedMatmul { Fast, Exact };

// Whether a KV cache of dtype t works on `device` (attention below): F32 and the coded
// formats (ops/kv_codec.h) everywhere, F16 or BF16 on CUDA only. The one rule the caches (kv/) and the ops' checks share.
bool kv_cache_dtype_supported(DType t, Device device);
// Whether keys of k and values of v can make one cache on `device`: one dtype for both, or
// two coded ones (TurboQuant's pairs; the GPU takes those whose values have fewer bits).
bool kv_cache_pair_supported(DType k, DType v, Device device);

// Encodes k floats (host memory) as one row of dtype t: F32/F16/BF16 or a GGUF block
// format (k a whole number of blocks). For building weights in code (dummy weights, tests).
void quantize_row(DType t, const float* src, void* dst, int64_t k);
// The inverse: one host row of dtype t (F32/F16/BF16 or a GGUF block format) as k floats.
void dequantize_row(DType t, const void* src, float* dst, int64_t k);
void set_quantized_matmul(QuantizedMatmul mode);
QuantizedMatmul quantized_matmul();
// Profiling (CORVID_OP_TIMES=1, CUDA): forgets the GPU op times summed so far, so that
// the table printed at exit leaves out a warm-up (bench calls it after its rep 0).
void reset_op_times();

// The dtype weight w (in its stored dtype) is kept in on `device`. On CUDA in Fast
// numerics, 2-D Q4_0, Q4_1, Q8_0 and Q4_K weights whose rows are a multiple of 16 bytes
// become their row layouts (Q4_0R, Q4_1R, Q8_0R, Q4_KR in core/dtype.h: same bytes,
// quants first) so decode GEMVs read them with 16-byte loads; everything else (Exact
// numerics too, whose F32 GEMVs read the GGUF layouts), and everything on the CPU, is
// kept as stored.
DType device_weight_dtype(const Tensor& w, Device device);
// The stored (GGUF) dtype a GPU row layout is made from: Q4_0R -> Q4_0 and so on; every
// other dtype is its own.
DType stored_weight_dtype(DType t);
// dst = raw in dst's dtype (device_weight_dtype of raw's): both 2-D on the same GPU, same
// shape, raw in its stored dtype; each row's blocks are split into quants and scales
// (Q4_K: quants regrouped by sub-block, super-block headers behind them).
void rearrange_weight(const Tensor& raw, const Tensor& dst);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]; weight [cols] F32/F16/BF16.
// out may alias x. Works on any leading shape (normalises the innermost dim).
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);

// LayerNorm over the innermost dim (BERT): out[r, :] = (x[r, :] - mean) / sqrt(var + eps)
// * weight + bias, with the biased variance (torch's). weight and bias [cols] F32. out may
// alias x.
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out);

// Rotary embedding in place on x[n, heads, head_dim] for token positions[n].
struct RopeParams {
  std::vector<float> inv_freq;  // rotary_dim / 2 frequencies, scaling already applied
  float attention_factor = 1.0f;  // multiplies cos and sin (yarn); 1 otherwise
  int rotary_dim = 0;             // leading dims of each head that rotate
  bool interleaved = false;       // adjacent pairs (x0,x1),(x2,x3)… vs rotate-half (x_i, x_{i+d/2})
};
void rope(const Tensor& x, const Indices& positions, const RopeParams& params);

// rope() on q [n, heads, head_dim] and k [n, kv_heads, head_dim] (in place), then the
// new keys and values into a KV cache: row rows[i] of k_cache and v_cache
// ([cache_rows, kv_heads, head_dim], a KV cache dtype: see attention) becomes k[i] and
// v[i], rounded to nearest even in a 16-bit cache; a negative row stores nothing
// (padding). v is shaped as k. What a decode step does between the q/k/v projection
// and attention, in one GPU launch instead of three.
void rope_store_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                   const RopeParams& params, const Indices& rows, const Tensor& k_cache,
                   const Tensor& v_cache);

// rope_store_kv's store alone, for a model without rotary positions (Whisper): row
// rows[i] of k_cache and v_cache becomes k[i] and v[i] (k, v [n, kv_heads, head_dim]
// F32; caches as rope_store_kv's); a negative row stores nothing.
void store_kv(const Tensor& k, const Tensor& v, const Indices& rows, const Tensor& k_cache, const Tensor& v_cache);

// out = silu(gate) * up, elementwise, all F32 of equal shape. out may alias gate.
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);

// A gated MLP's gate/up projection of one token: w [2 * I, k] holds the gate rows, then
// the up rows; out [1, I] = act(x @ gate^T) * (x @ up^T) for x [1, k], act silu (SwiGLU)
// or gelu_tanh (GeGLU). gate_up [1, 2 * I] is scratch for the two products: matmul into
// it, then silu_mul / gelu_tanh_mul, which is what runs unless a backend does the whole
// op in one pass (the GPU's int8 GEMVs: one kernel whose blocks take matching gate and up
// rows; gate_up is then left as it was). Same results as the two ops. None of x, gate_up
// and out may overlap.
enum class GatedActivation { Silu, GeluTanh };
void matmul_glu(const Tensor& x, const Tensor& w, const Tensor& gate_up, const Tensor& out, GatedActivation act);

// out = gelu_tanh(gate) * up, elementwise (GeGLU with the tanh-approximated GELU,
// transformers' gelu_pytorch_tanh), all F32 of equal shape. out may alias gate.
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out);

// x = GELU(x) in place, the exact form x / 2 * (1 + erf(x / sqrt(2))) (F32): BERT's "gelu".
void gelu(const Tensor& x);

// x *= s elementwise, in place (F32).
void scale(const Tensor& x, float s);

// x = cap * tanh(x / cap) elementwise, in place (F32; cap > 0): logit soft-capping.
void softcap(const Tensor& x, float cap);

// Each head vector of x [n, heads, head_dim] (F32, head_dim a power of 2) in place
// becomes H D x / sqrt(head_dim): fixed random signs D (a seed of its own, the same
// for every head and call), then the Walsh-Hadamard transform H. An orthogonal map, so
// q.k is unchanged when both are rotated, while a key's large channels spread over all
// of them (what quantized keys need: --kv-rotate). The CPU and CUDA give the same bits.
void hadamard_rotate(const Tensor& x);
// Its inverse, x -> D H x / sqrt(d): a TurboQuant attention output back from the rotated basis.
void hadamard_unrotate(const Tensor& x);

// out[r, c] = x[r, offset + c]: `out.cols()` columns of each row of x from column
// `offset` on (F32, x [n, w], out [n, cols], offset + cols <= w). A layer's slice of a
// per-token buffer packed layer by layer (Gemma 4's per-layer inputs).
void gather_columns(const Tensor& x, int64_t offset, const Tensor& out);

// The patches of a 1-D convolution over time: out[t, c * kernel + j] = x[t * stride + j - pad, c]
// (0 outside x), x [T_in, C] time-major, out [T_out, C * kernel] with T_out =
// (T_in + 2 pad - kernel) / stride + 1; conv1d is then matmul(out, weight [C_out, C * kernel])
// (PyTorch's [C_out, C, kernel] flattened). F32. Whisper's encoder stem.
void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out);

// x += y elementwise (F32, equal shapes).
void add(const Tensor& x, const Tensor& y);

// x += y, then out = rms_norm(x, weight, eps): the residual add and the next norm in
// one pass (one launch instead of two on a GPU). Same formula as add() then rms_norm()
// (the GPU sums the squares in another order).
void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& weight, float eps, const Tensor& out);

// Causal grouped-query attention of n new queries over a KV cache.
//   q        [n, n_heads, head_dim]       F32
//   k_cache  [capacity, n_kv_heads, head_dim]; rows 0..positions[i] are valid for query i
//   v_cache  [capacity, n_kv_heads, head_dim]
// KV caches are F32 on every device, or F16 / BF16 (both caches alike) on CUDA, where
// decode reads half the bytes; scores and softmax stay F32 either way.
//   out      [n, n_heads, head_dim]       F32
// Query i (at absolute position positions[i]) attends to cache rows
// max(0, positions[i] - window + 1) ..= positions[i] (window <= 0: no window).
// Query head h reads kv head h / (n_heads / n_kv_heads).
//
// lse (optional, [n, n_heads] F32): each query head's log-sum-exp of its scaled scores
// (natural log), so that attention over two parts of one sequence's keys (the delayed
// switch: kv/kv_manager.h) can be merged (merge_attention). With lse given, a query may
// have a negative position: it sees no key, its lse is -inf and its out row is undefined.
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Indices& positions, float scale, int64_t window, const Tensor& out,
               const Tensor* lse = nullptr);

// out, lse: attention over one part of a sequence's keys; other, other_lse: over the rest
// (each from attention or paged_attention with lse). out becomes the attention over all
// of them: the parts weighted by exp(lse - max), a part whose lse is -inf dropped. lse is
// left as it was. [n, n_heads, head_dim] and [n, n_heads] F32.
void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse);

// rope_store_kv with rows = positions (a contiguous cache: a position's row is the
// position itself), then attention of q over the cache: a decode step's work between
// the q/k/v projection and the output projection. On a GPU one query runs it as one
// kernel (the attention blocks rotate q and the new key themselves). Same results as the
// two ops, except that q and k may be left unrotated (the two ops rotate them in place).
void rope_store_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                             const RopeParams& params, const Tensor& k_cache, const Tensor& v_cache, float scale,
                             int64_t window, const Tensor& out);

// Where each query's keys and values live in a paged KV cache (see paged_attention).
struct PagedKV {
  int64_t block_size = 0;                  // positions per block
  Indices block_tables;                    // [n_seqs, max_blocks] row-major: row s = sequence s's blocks
  int64_t max_blocks = 0;                  // row length of block_tables
  Indices query_seq;                       // [n]: the sequence (row of block_tables) of each query
};

// Causal grouped-query attention of n queries from many sequences over a paged KV cache:
// the same contract and the same bits as attention(), except that position p of query
// i's sequence (table T = its row of block_tables) lives in pool row
// T[p / block_size] * block_size + p % block_size.
//   q               [n, n_heads, head_dim]                           F32
//   k_pool, v_pool  [num_blocks * block_size, n_kv_heads, head_dim]  (dtypes as attention's)
//   out             [n, n_heads, head_dim]                           F32
// Every table entry a query reads (its window's blocks) must be a block of the pool.
// On CUDA the result equals attention()'s numerics (fp32 kernels; prefill chunks of 16+
// queries take the tensor-core kernel in Fast mode), not bit for bit across batchings.
// lse as for attention().
void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     const Indices& positions, float scale, int64_t window, const Tensor& out,
                     const Tensor* lse = nullptr);

// The widest attention head the backend of `device` runs (attention, paged_attention).
int64_t max_attention_head_dim(Device device);

// Softmax over the innermost dim, in place (F32).
void softmax(const Tensor& x);

}  // namespace corvid::ops
