// ops:: MoE front (contracts in moe.h): argument checks, then dispatch on the device.
#include "corvid/ops/moe.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "corvid/ops/dispatch.h"

namespace corvid::ops {

namespace {

void check_stack(const char* name, const ExpertStack& s, int64_t experts, int64_t rows, int64_t cols, Device device) {
  if (!s.stacked()) {
    CORVID_CHECK(device == Device::CPU, "ops::moe_experts: ", name, " must be one stack on ", device_name(device));
    CORVID_CHECK(static_cast<int64_t>(s.parts.size()) == experts, "ops::moe_experts: ", name, " has ",
                 s.parts.size(), " experts, not ", experts);
    for (const Tensor& t : s.parts)
      CORVID_CHECK(t.data && t.ndim == 2 && t.device == device && t.rows() == rows && t.cols() == cols &&
                       t.dtype == s.parts[0].dtype && is_weight_dtype(t.dtype) &&
                       cols % dtype_info(t.dtype).block_elems == 0,
                   "ops::moe_experts: ", name, " expert ", t.shape_str(), " ", dtype_name(t.dtype), " is not [", rows,
                   ", ", cols, "] in one weight dtype");
    return;
  }
  const Tensor& d = s.data;
  CORVID_CHECK(d.data && d.ndim == 2 && d.device == device, "ops::moe_experts: ", name,
               " must be a 2-D stack of expert matrices on the op's device");
  CORVID_CHECK(is_weight_dtype_on(d.dtype, device), "ops::moe_experts: unsupported ", name, " dtype ",
               dtype_name(d.dtype), " on ", device_name(device));
  CORVID_CHECK(s.rows == rows && d.cols() == cols && s.offset >= 0 && s.offset + s.rows <= s.stride &&
                   d.rows() == experts * s.stride,
               "ops::moe_experts: ", name, " ", d.shape_str(), " (rows ", s.rows, ", stride ", s.stride, ", offset ",
               s.offset, ") is not ", experts, " experts of [", rows, ", ", cols, "]");
  CORVID_CHECK(cols % dtype_info(d.dtype).block_elems == 0, "ops::moe_experts: ", name, " rows of ", cols,
               " elements are not whole ", dtype_name(d.dtype), " blocks");
}

void check_rows(const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  check_f32("moe_experts", name, t);
  CORVID_CHECK(t.rows() >= rows && t.cols() == cols, "ops::moe_experts: scratch ", name, " ", t.shape_str(),
               " must hold [", rows, ", ", cols, "]");
}

}  // namespace

bool moe_supported(Device device) {
#ifdef CORVID_HAVE_CUDA
  return device == Device::CPU || device == Device::CUDA;
#else
  return device == Device::CPU;
#endif
}

int64_t moe_plan_size(int64_t pairs, int64_t experts) {
  constexpr int64_t kTileRows = 64;  // ops/cuda/moe_experts.cu's row tile
  const int64_t tiles = std::min(pairs, (pairs + kTileRows - 1) / kTileRows + experts);
  return tiles * (kTileRows + 1);
}

void moe_route(const Tensor& logits, bool norm_topk, const Tensor& weights, const Tensor& ids) {
  const Device device = common_device("moe_route", {&logits, &weights, &ids});
  check_f32("moe_route", "logits", logits);
  check_f32("moe_route", "weights", weights);
  CORVID_CHECK(ids.dtype == DType::I32, "ops::moe_route: ids must be I32, got ", dtype_name(ids.dtype));
  const int64_t n = logits.rows(), experts = logits.cols(), k = weights.cols();
  CORVID_CHECK(weights.rows() == n && ids.rows() == n && ids.cols() == k, "ops::moe_route: weights ",
               weights.shape_str(), " and ids ", ids.shape_str(), " must both be [", n, ", k]");
  CORVID_CHECK(k >= 1 && k <= experts && k <= 64 && experts <= 1024, "ops::moe_route: top-", k, " of ", experts,
               " experts (1 <= k <= 64, at most 1024 experts)");
  if (n == 0) return;
  CORVID_DISPATCH(device, moe_route, logits, norm_topk, weights, ids);
}

void moe_experts(const Tensor& x, const Experts& e, const Tensor& ids, const Tensor& weights, GatedActivation act,
                 const MoeScratch& s, const Tensor& out) {
  const Device device = common_device("moe_experts", {&x, &ids, &weights, &out, &s.act, &s.y});
  check_f32("moe_experts", "x", x);
  check_f32("moe_experts", "out", out);
  check_f32("moe_experts", "weights", weights);
  const int64_t n = x.rows(), H = x.cols(), k = ids.cols(), I = e.ffn;
  CORVID_CHECK(ids.dtype == DType::I32 && ids.rows() == n && weights.rows() == n && weights.cols() == k,
               "ops::moe_experts: ids ", ids.shape_str(), " (I32) and weights ", weights.shape_str(),
               " must be [", n, ", k]");
  CORVID_CHECK(out.rows() == n && out.cols() == H, "ops::moe_experts: out ", out.shape_str(), " must be [", n, ", ",
               H, "]");
  CORVID_CHECK(!overlaps(x, out) || x.data == out.data, "ops::moe_experts: out must be x or apart from it");
  CORVID_CHECK(e.count > 0 && I > 0, "ops::moe_experts: no experts");
  check_stack("gate", e.gate, e.count, I, H, device);
  check_stack("up", e.up, e.count, I, H, device);
  check_stack("down", e.down, e.count, H, I, device);
  CORVID_CHECK(e.gate.dtype() == e.up.dtype(), "ops::moe_experts: gate and up differ in dtype");
  check_rows("act", s.act, n * k, I);
  check_rows("y", s.y, n * k, H);
  if (device == Device::CPU) {
    common_device("moe_experts", {&x, &s.x, &s.up});
    check_rows("x", s.x, n * k, H);
    check_rows("up", s.up, n * k, I);
  } else {
    CORVID_CHECK(s.plan.dtype == DType::I32 && s.plan.data && s.plan.device == device &&
                     s.plan.numel() >= moe_plan_size(n * k, e.count),
                 "ops::moe_experts: scratch plan must be I32 of ", moe_plan_size(n * k, e.count), " values on ",
                 device_name(device));
    // The GPU kernels read eight weights and four activations at a time (ops/cuda/decode8.cuh).
    for (const Tensor* t : {&x, &s.act, &s.y})
      CORVID_CHECK(reinterpret_cast<uintptr_t>(t->data) % 16 == 0, "ops::moe_experts: on ", device_name(device),
                   " x and the scratch rows must be 16-byte aligned");
    CORVID_CHECK(H % 8 == 0 && I % 8 == 0, "ops::moe_experts: on ", device_name(device), " the hidden size (", H,
                 ") and expert width (", I, ") must be multiples of 8");
    if (e.staging.data) {
      const int64_t need = expert_staging_bytes(e.gate.data.nbytes() + e.down.data.nbytes() +
                                                (e.up.data.data == e.gate.data.data ? 0 : e.up.data.nbytes()));
      CORVID_CHECK(e.staging.device == device && static_cast<int64_t>(e.staging.nbytes()) >= need,
                   "ops::moe_experts: the staging buffer holds ", e.staging.nbytes(), " bytes on ",
                   device_name(e.staging.device), ", the stacks need ", need, " on ", device_name(device));
    }
  }
  if (n == 0) return;
  CORVID_DISPATCH(device, moe_experts, x, e, ids, weights, act, s, out);
}

void sigmoid_gate_add(const Tensor& x, const Tensor& gate, const Tensor& y, const Tensor& out) {
  const Device device = common_device("sigmoid_gate_add", {&x, &gate, &y, &out});
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"x", &x}, {"gate", &gate}, {"y", &y}, {"out", &out}})
    check_f32("sigmoid_gate_add", name, *t);
  CORVID_CHECK(y.rows() == x.rows() && y.cols() == x.cols() && out.rows() == x.rows() && out.cols() == x.cols() &&
                   gate.numel() == x.rows(),
               "ops::sigmoid_gate_add: x ", x.shape_str(), ", y ", y.shape_str(), ", out ", out.shape_str(),
               " and gate ", gate.shape_str(), " must be [n, H], [n, H], [n, H] and [n, 1]");
  if (x.rows() == 0) return;
  CORVID_DISPATCH(device, sigmoid_gate_add, x, gate, y, out);
}

}  // namespace corvid::ops
