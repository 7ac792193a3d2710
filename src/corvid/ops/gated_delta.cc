// ops/gated_delta.h's front: shapes, dtypes and runs checked with messages that name the
// op, then the CPU backend (the only one so far).
#include "corvid/ops/gated_delta.h"

#include "corvid/core/error.h"
#include "corvid/ops/cpu/gated_delta.h"
#include "corvid/ops/dispatch.h"

namespace corvid::ops {

namespace {

Device cpu_only(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) check_f32(op, "input", *t);
  const Device device = common_device(op, ts);
  CORVID_CHECK(device == Device::CPU, "ops::", op, ": runs on the CPU only for now (Gated DeltaNet has no ",
               device_name(device), " kernels yet)");
  return device;
}

// Runs that cover [0, n) in order, with a slot each below `slots`.
void check_runs(const char* op, const RecurrentRuns& runs, int64_t n, int64_t slots) {
  CORVID_CHECK(!runs.starts.empty() && runs.starts.size() == runs.slots.size() + 1, "ops::", op, ": ",
               runs.starts.size(), " run starts for ", runs.slots.size(), " slots (one more start than runs)");
  CORVID_CHECK(runs.starts.front() == 0 && runs.starts.back() == n, "ops::", op, ": runs cover [",
               runs.starts.front(), ", ", runs.starts.back(), "), not the step's ", n, " tokens");
  for (size_t s = 0; s < runs.slots.size(); ++s) {
    CORVID_CHECK(runs.starts[s] <= runs.starts[s + 1], "ops::", op, ": run ", s, " ends before it starts");
    CORVID_CHECK(runs.slots[s] >= 0 && runs.slots[s] < slots, "ops::", op, ": run ", s, " has slot ", runs.slots[s],
                 " of ", slots);
  }
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const RecurrentRuns& runs,
                        const Tensor& out) {
  const char* op = "causal_conv1d_silu";
  cpu_only(op, {&x, &weight, &conv_state, &out});
  CORVID_CHECK(x.ndim == 2 && out.shape == x.shape, "ops::", op, ": x ", x.shape_str(), " and out ", out.shape_str(),
               " must both be [n, channels]");
  const int64_t c = x.dim(1);
  CORVID_CHECK(weight.ndim == 2 && weight.dim(0) == c && weight.dim(1) >= 2 && weight.dim(1) <= 17, "ops::", op,
               ": weight ", weight.shape_str(), " must be [", c, ", kernel in 2..17]");
  CORVID_CHECK(conv_state.ndim == 3 && conv_state.dim(1) == weight.dim(1) - 1 && conv_state.dim(2) == c, "ops::", op,
               ": conv_state ", conv_state.shape_str(), " must be [slots, ", weight.dim(1) - 1, ", ", c, "]");
  CORVID_CHECK(out.data != x.data || x.numel() == 0, "ops::", op, ": out may not alias x");
  check_runs(op, runs, x.dim(0), conv_state.dim(0));
  cpu::causal_conv1d_silu(x, weight, conv_state, runs, out);
}

void delta_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                 const Tensor& beta) {
  const char* op = "delta_gates";
  cpu_only(op, {&a, &b, &a_log, &dt_bias, &g, &beta});
  CORVID_CHECK(a.ndim == 2 && b.shape == a.shape && g.shape == a.shape && beta.shape == a.shape, "ops::", op,
               ": a ", a.shape_str(), ", b ", b.shape_str(), ", g ", g.shape_str(), " and beta ", beta.shape_str(),
               " must all be [n, value_heads]");
  CORVID_CHECK(a_log.numel() == a.dim(1) && dt_bias.numel() == a.dim(1), "ops::", op, ": A_log ", a_log.shape_str(),
               " and dt_bias ", dt_bias.shape_str(), " must hold ", a.dim(1), " heads");
  cpu::delta_gates(a, b, a_log, dt_bias, g, beta);
}

void l2_normalize_heads(const Tensor& x, float eps, float scale) {
  cpu_only("l2_normalize_heads", {&x});
  CORVID_CHECK(x.ndim == 3, "ops::l2_normalize_heads: x ", x.shape_str(), " must be [n, heads, head_dim]");
  cpu::l2_normalize_heads(x, eps, scale);
}

void gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& z, float eps, const Tensor& out) {
  const char* op = "gated_rms_norm";
  cpu_only(op, {&x, &weight, &z, &out});
  CORVID_CHECK(x.ndim == 3 && z.shape == x.shape && out.shape == x.shape, "ops::", op, ": x ", x.shape_str(), ", z ",
               z.shape_str(), " and out ", out.shape_str(), " must all be [n, heads, head_dim]");
  CORVID_CHECK(weight.numel() == x.dim(2), "ops::", op, ": weight ", weight.shape_str(), " must hold ", x.dim(2));
  cpu::gated_rms_norm(x, weight, z, eps, out);
}

void mul_sigmoid(const Tensor& x, const Tensor& gate) {
  cpu_only("mul_sigmoid", {&x, &gate});
  CORVID_CHECK(gate.numel() == x.numel(), "ops::mul_sigmoid: x ", x.shape_str(), " and gate ", gate.shape_str(),
               " must hold as many elements");
  cpu::mul_sigmoid(x, gate);
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const RecurrentRuns& runs, const Tensor& out, DeltaForm form) {
  const char* op = "gated_delta_rule";
  cpu_only(op, {&q, &k, &v, &g, &beta, &state, &out});
  CORVID_CHECK(q.ndim == 3 && k.shape == q.shape, "ops::", op, ": q ", q.shape_str(), " and k ", k.shape_str(),
               " must both be [n, key_heads, key_dim]");
  const int64_t n = q.dim(0), hk = q.dim(1), dk = q.dim(2);
  CORVID_CHECK(v.ndim == 3 && v.dim(0) == n && out.shape == v.shape, "ops::", op, ": v ", v.shape_str(), " and out ",
               out.shape_str(), " must both be [", n, ", value_heads, value_dim]");
  const int64_t hv = v.dim(1), dv = v.dim(2);
  CORVID_CHECK(hv % hk == 0, "ops::", op, ": ", hv, " value heads are not a multiple of ", hk, " key heads");
  CORVID_CHECK(g.ndim == 2 && g.dim(0) == n && g.dim(1) == hv && beta.shape == g.shape, "ops::", op, ": g ",
               g.shape_str(), " and beta ", beta.shape_str(), " must be [", n, ", ", hv, "]");
  CORVID_CHECK(state.ndim == 4 && state.dim(1) == hv && state.dim(2) == dk && state.dim(3) == dv, "ops::", op,
               ": state ", state.shape_str(), " must be [slots, ", hv, ", ", dk, ", ", dv, "]");
  check_runs(op, runs, n, state.dim(0));
  cpu::gated_delta_rule(q, k, v, g, beta, state, runs, out, form);
}

}  // namespace corvid::ops
