// The CPU backend of ops/gated_delta.h (whose front checks the arguments first).
#pragma once

#include "corvid/ops/gated_delta.h"

namespace corvid::ops::cpu {

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const RecurrentRuns& runs,
                        const Tensor& out);
void delta_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                 const Tensor& beta);
void l2_normalize_heads(const Tensor& x, float eps, float scale);
void gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& z, float eps, const Tensor& out);
void mul_sigmoid(const Tensor& x, const Tensor& gate);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const RecurrentRuns& runs, const Tensor& out, DeltaForm form);

}  // namespace corvid::ops::cpu
