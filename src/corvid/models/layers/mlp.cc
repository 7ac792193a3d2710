#include "corvid/models/layers/mlp.h"

#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid::layers {

Activation parse_activation(const std::string& name, const std::string& source) {
  if (name == "silu" || name == "swish") return Activation::Silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh") return Activation::GeluTanh;
  fail(source, ": hidden activation '", name, "' is not supported (silu, gelu_pytorch_tanh)");
}

void load_gated_mlp(WeightLoader& w, const std::string& p, int64_t hidden, int64_t ffn, bool bias, Activation act,
                    GatedMlp& m) {
  m.act = act;
  m.ffn = ffn;
  if (!bias) {
    WeightLoader::Fused f = w.fused({{p + "gate_proj.weight", {ffn, hidden}}, {p + "up_proj.weight", {ffn, hidden}}});
    m.gate_proj = f.parts[0], m.up_proj = f.parts[1];
    m.gate_up_proj = f.whole;
  } else {
    m.gate_proj = w.get(p + "gate_proj.weight", {ffn, hidden});
    m.up_proj = w.get(p + "up_proj.weight", {ffn, hidden});
    m.gate_bias = w.get(p + "gate_proj.bias", {ffn}, WeightRole::Bias);
    m.up_bias = w.get(p + "up_proj.bias", {ffn}, WeightRole::Bias);
    m.down_bias = w.get(p + "down_proj.bias", {hidden}, WeightRole::Bias);
  }
  m.down_proj = w.get(p + "down_proj.weight", {hidden, ffn});
}

int64_t GatedMlp::weight_bytes() const {
  int64_t total = 0;
  for (const Tensor* t : {&gate_proj, &up_proj, &down_proj, &gate_bias, &up_bias, &down_bias})
    if (t->data) total += static_cast<int64_t>(t->nbytes());
  return total;
}

static const Tensor* bias(const Tensor& t) { return t.data ? &t : nullptr; }

void GatedMlp::forward(const Tensor& h, Scratch& s, const Tensor& out) const {
  const int64_t n = h.rows();
  const Tensor gate = rows_of(s.gate, n, ffn), up = rows_of(s.up, n, ffn);
  if (n == 1 && gate_up_proj.data) {
    // One token: one GEMV over the gate and up rows (on the GPU also the activation).
    ops::matmul_glu(h, gate_up_proj, row_slice(s.fused, 0, 2 * ffn), gate,
                    act == Activation::Silu ? ops::GatedActivation::Silu : ops::GatedActivation::GeluTanh);
  } else {
    ops::matmul(h, gate_proj, gate, bias(gate_bias));
    ops::matmul(h, up_proj, up, bias(up_bias));
    if (act == Activation::Silu) {
      ops::silu_mul(gate, up, gate);
    } else {
      ops::gelu_tanh_mul(gate, up, gate);
    }
  }
  ops::matmul(gate, down_proj, out, bias(down_bias));
}

}  // namespace corvid::layers
