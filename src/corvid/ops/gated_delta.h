// Gated DeltaNet's operations (Qwen3.5, Qwen3-Next; ../shared/reference/architectures.md
// §2.4): the short causal convolution with its rolling state, the gates, the L2 and gated
// RMS norms, and the delta-rule recurrence over a per-sequence fp32 state, in its
// one-token recurrent form and its chunked (WY / UT transform) form. CPU only for now;
// a tensor elsewhere is refused with a clear error.
//
// A step holds runs of tokens, one per sequence, each reading and writing its own state
// slot (row of the state tensors) in place: no gather or scatter of whole states.
#pragma once

#include <cstdint>
#include <span>

#include "corvid/core/tensor.h"

namespace corvid::ops {

// The sequences of a step: tokens [starts[s], starts[s + 1]) belong to sequence s, whose
// state lives in slot slots[s].
struct RecurrentRuns {
  std::span<const int64_t> starts;  // [sequences + 1], from 0 to the step's token count
  std::span<const int32_t> slots;   // [sequences]
};

// out[t, c] = silu(Σ_j weight[c, j] · x̂[t − K + 1 + j, c]) over each run, where x̂ is the
// run's inputs x [n, C] preceded by its sequence's K − 1 earlier inputs, which
// conv_state [slots, K − 1, C] holds oldest first (zeros at a sequence's start); the
// slot then holds the K − 1 latest inputs. weight [C, K] (HF's conv1d [C, 1, K]). out
// may not alias x. All F32.
void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const RecurrentRuns& runs,
                        const Tensor& out);

// g = −exp(a_log) · softplus(a + dt_bias) and beta = sigmoid(b), per token and value
// head (a, b, g, beta [n, Hv]; a_log, dt_bias [Hv]). g is the log of the step's decay.
void delta_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                 const Tensor& beta);

// x [n, heads, d] in place: each head's x / sqrt(Σ x² + eps) · scale (the kernels' q/k
// normalisation; q then carries the d^-1/2 readout scale).
void l2_normalize_heads(const Tensor& x, float eps, float scale);

// out [n, heads, d] = RMSNorm(x) · weight · silu(z) per head (weight [d], plain, not 1 + w),
// x and z [n, heads, d]. out may alias x.
void gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& z, float eps, const Tensor& out);

// x *= sigmoid(gate), elementwise (the gated attention's output gate). F32 of one shape.
void mul_sigmoid(const Tensor& x, const Tensor& gate);

// How gated_delta_rule runs a run: Auto takes the recurrent form for one token and the
// chunked one for more; the others force one form (tests).
enum class DeltaForm { Auto, Recurrent, Chunked };
inline constexpr int64_t kDeltaChunk = 64;  // tokens a chunk of the chunked form takes

// The gated delta rule per value head h (key head h / (Hv / Hk)), from the run's state S
// = state[slot, h] ([dk, dv] fp32), token by token:
//   S ← exp(g_t) S;  S ← S + k_t ⊗ β_t (v_t − Sᵀ k_t);  out_t = Sᵀ q_t,
// leaving the last S in the slot. q, k [n, Hk, dk] (normalised), v and out [n, Hv, dv],
// g and beta [n, Hv], state [slots, Hv, dk, dv]. The chunked form computes the same in
// chunks of kDeltaChunk tokens from the run's first; the two agree to rounding.
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const RecurrentRuns& runs, const Tensor& out,
                      DeltaForm form = DeltaForm::Auto);

}  // namespace corvid::ops
