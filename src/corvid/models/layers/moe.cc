#include "corvid/models/layers/moe.h"

#include <algorithm>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/ops/ops.h"

namespace corvid::layers {

namespace {

ops::GatedActivation gated(Activation a) {
  return a == Activation::Silu ? ops::GatedActivation::Silu : ops::GatedActivation::GeluTanh;
}

// Expert matrices of one projection asked for one a part, as a stack.
ops::ExpertStack stack_of(WeightLoader& w, const std::string& prefix, const char* proj, int64_t experts, int64_t rows,
                          int64_t cols, Residency where) {
  std::vector<WeightLoader::Part> parts;
  for (int64_t e = 0; e < experts; ++e)
    parts.push_back({prefix + "experts." + std::to_string(e) + "." + proj + ".weight", {rows, cols}});
  WeightLoader::Fused f = w.stacked(parts, where);
  ops::ExpertStack s;
  s.rows = s.stride = rows;
  if (f.whole.data) {
    s.data = f.whole;
  } else {
    CORVID_CHECK(w.device() == Device::CPU, w.source(), ": the experts' ", prefix, "experts.*.", proj,
                 " differ in dtype (the GPU takes one stack a projection)");
    s.parts = std::move(f.parts);
  }
  return s;
}

ops::ExpertStack whole_stack(const Tensor& t, int64_t rows, int64_t stride, int64_t offset) {
  ops::ExpertStack s;
  s.data = t;
  s.rows = rows, s.stride = stride, s.offset = offset;
  return s;
}

int64_t stack_bytes(const ops::ExpertStack& s, int64_t experts) {
  if (!s.stacked()) return experts * static_cast<int64_t>(s.parts[0].nbytes());
  return experts * s.rows * static_cast<int64_t>(s.data.row_bytes());
}

}  // namespace

void check_moe_shape(const MoeShape& s, const std::string& source) {
  CORVID_CHECK(s.top_k >= 1 && s.top_k <= s.experts && s.top_k <= 64 && s.experts <= 1024 && s.ffn > 0 &&
                   s.shared_ffn >= 0,
               source, ": a MoE layer of top-", s.top_k, " of ", s.experts, " experts of width ", s.ffn,
               " (shared expert ", s.shared_ffn, "): needs 1 <= top-k <= min(experts, 64), at most 1024 experts "
               "and a positive width");
}

void load_moe(WeightLoader& w, const std::string& p, int64_t hidden, const MoeShape& shape, MoeBlock& m,
              Residency at) {
  check_moe_shape(shape, w.source());
  const int64_t E = shape.experts, I = shape.ffn, H = hidden;
  m.shape = shape;
  m.router = w.get(p + "gate.weight", {E, H});
  m.experts.count = E;
  m.experts.ffn = I;
  const std::string ex = p + "experts.";
  if (w.dummy() || w.has(ex + "gate_up_proj")) {
    // transformers 5's fused layout: expert e's gate rows, then its up rows.
    const Tensor gate_up = w.get_stack(ex + "gate_up_proj", E, 2 * I, H, at);
    m.experts.gate = whole_stack(gate_up, I, 2 * I, 0);
    m.experts.up = whole_stack(gate_up, I, 2 * I, I);
    m.experts.down = whole_stack(w.get_stack(ex + "down_proj", E, H, I, at), H, H, 0);
  } else if (w.has(ex + "gate_proj")) {
    // GGUF's ffn_{gate,up,down}_exps, one stack each.
    m.experts.gate = whole_stack(w.get_stack(ex + "gate_proj", E, I, H, at), I, I, 0);
    m.experts.up = whole_stack(w.get_stack(ex + "up_proj", E, I, H, at), I, I, 0);
    m.experts.down = whole_stack(w.get_stack(ex + "down_proj", E, H, I, at), H, H, 0);
  } else {
    m.experts.gate = stack_of(w, p, "gate_proj", E, I, H, at);
    m.experts.up = stack_of(w, p, "up_proj", E, I, H, at);
    m.experts.down = stack_of(w, p, "down_proj", E, H, I, at);
  }
  if (shape.shared_ffn > 0) {
    load_gated_mlp(w, p + "shared_expert.", H, shape.shared_ffn, false, shape.act, m.shared);
    m.shared_gate = w.get(p + "shared_expert_gate.weight", {1, H});
  }
}

void MoeBlock::forward(const Tensor& h, Scratch& s, const Tensor& out) const {
  const int64_t n = h.rows(), k = shape.top_k, H = h.cols();
  const Tensor logits = rows_of(s.router, n, shape.experts);
  const Tensor weights = rows_of(s.route_weights, n, k);
  const Tensor ids(DType::I32, {n, k}, s.route_ids.tensor.data, s.route_ids.tensor.device);
  // Without a shared expert the experts' sum is the block's output (moe_experts may write
  // over h); with one it is gated in after the shared expert has read h.
  const Tensor routed = shape.shared_ffn > 0 ? rows_of(s.routed, n, H) : out;
  ops::matmul(h, router, logits);
  ops::moe_route(logits, shape.norm_topk, weights, ids);
  const ops::MoeScratch ms{rows_of(s.expert_x, n * k, H), rows_of(s.expert_act, n * k, shape.ffn),
                           rows_of(s.expert_up, n * k, shape.ffn), rows_of(s.expert_y, n * k, H),
                           s.expert_plan.tensor};
  ops::moe_experts(h, experts, ids, weights, gated(shape.act), ms, routed);
  if (shape.shared_ffn > 0) {
    const Tensor shared_out = rows_of(s.shared, n, H), gate = rows_of(s.shared_gate, n, 1);
    shared.forward(h, s, shared_out);
    ops::matmul(h, shared_gate, gate);
    ops::sigmoid_gate_add(routed, gate, shared_out, out);
  }
}

void share_expert_staging(WeightLoader& w, const std::vector<MoeBlock*>& offloaded) {
  int64_t bytes = 0;
  for (const MoeBlock* m : offloaded) bytes = std::max(bytes, ops::expert_staging_bytes(m->routed_expert_bytes()));
  const Tensor staging = w.device_scratch(bytes);
  if (!staging.data) return;
  for (MoeBlock* m : offloaded) m->experts.staging = staging;
}

int64_t MoeBlock::active_weight_bytes() const {
  int64_t total = static_cast<int64_t>(router.nbytes()) + shared.weight_bytes();
  if (shared_gate.data) total += static_cast<int64_t>(shared_gate.nbytes());
  for (const ops::ExpertStack* s : {&experts.gate, &experts.up, &experts.down}) total += stack_bytes(*s, shape.top_k);
  return total;
}

int64_t MoeBlock::routed_expert_bytes() const {
  int64_t total = 0;
  for (const ops::ExpertStack* s : {&experts.gate, &experts.up, &experts.down}) total += stack_bytes(*s, shape.experts);
  return total;
}

int64_t MoeBlock::inactive_parameters() const {
  return (shape.experts - shape.top_k) * 3 * shape.ffn * router.cols();
}

}  // namespace corvid::layers
