// ops:: front: argument checks with messages that name the op and the
// offending shape/dtype, then dispatch on the device: every tensor of a call
// must be on the same device; CPU tensors go to ops/cpu, CUDA tensors to
// ops/cuda (in builds with CORVID_HAVE_CUDA; otherwise a clear error).
#include "corvid/ops/ops.h"

#include "corvid/ops/kv_codec.h"
#include "corvid/ops/kv_turbo.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <string>

#include "corvid/core/device.h"
#include "corvid/core/env.h"
#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/ops/cpu/cpu_ops.h"
#include "corvid/ops/cpu/quants.h"
#include "corvid/ops/dispatch.h"

namespace corvid::ops {

namespace {

// A KV cache's keys and values: F32 on every device, F16 / BF16 on CUDA, the coded
// formats on the CPU (ops.h); both of one dtype, [rows, kv_heads, head_dim] with whole
// groups per head for the coded formats.
void check_kv_caches(const char* op, Device device, const Tensor& k, const Tensor& v) {
  CORVID_CHECK(kv_cache_dtype_supported(k.dtype, device), "ops::", op, ": a KV cache of ",
               dtype_name(k.dtype), " on ", device_name(device),
               " (F32 and the coded q8/q4/fp8 formats everywhere, F16 or BF16 on CUDA)");
  CORVID_CHECK(kv_cache_dtype_supported(v.dtype, device), "ops::", op, ": a KV cache of ",
               dtype_name(v.dtype), " values on ", device_name(device));
  // Keys and values may differ only as TurboQuant's widths do.
  CORVID_CHECK(kv_cache_pair_supported(k.dtype, v.dtype, device), "ops::", op, ": keys of ", dtype_name(k.dtype),
               " with values of ", dtype_name(v.dtype), " on ", device_name(device));
  for (const Tensor* t : {&k, &v}) {
    if (!kv_codec::is_coded(t->dtype)) continue;
    const int group = kv_codec::group_values(t->dtype);
    CORVID_CHECK(t->ndim == 3 && t->dim(2) % group == 0, "ops::", op, ": a ", dtype_name(t->dtype), " cache needs ",
                 "head_dim a multiple of ", group, ", got ", t->shape_str());
  }
  CORVID_CHECK((k.data != nullptr || k.numel() == 0) && (v.data != nullptr || v.numel() == 0), "ops::", op,
               ": the KV cache has no data");
}

void check_same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  CORVID_CHECK(a.numel() == b.numel() && a.cols() == b.cols(), "ops::", op, ": ", a_name, " ", a.shape_str(), " and ",
               b_name, " ", b.shape_str(), " differ in shape");
}

}  // namespace

void embedding(const Tensor& table, const Indices& ids, const Tensor& out) {
  const Device device = common_device("embedding", {&table, &out});
  CORVID_CHECK(table.ndim == 2, "ops::embedding: table must be 2-D [vocab, d], got ", table.shape_str());
  CORVID_CHECK(is_weight_dtype_on(table.dtype, device), "ops::embedding: unsupported table dtype ",
               dtype_name(table.dtype), " on ", device_name(device));
  check_f32("embedding", "out", out);
  CORVID_CHECK(out.rows() == static_cast<int64_t>(ids.size()) && out.cols() == table.cols(), "ops::embedding: out ",
               out.shape_str(), " must be [", ids.size(), ", ", table.cols(), "]");
  for (int32_t id : ids) {
    CORVID_CHECK(id >= 0 && id < table.dim(0), "ops::embedding: token id ", id, " outside vocabulary [0, ",
                 table.dim(0), ")");
  }
  CORVID_DISPATCH(device, embedding, table, ids, out);
}

namespace {

// matmul's arguments (matmul_glu's too, for the products it replaces).
void check_matmul_args(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias) {
  const Device device = x.device;
  check_f32("matmul", "x", x);
  check_f32("matmul", "out", out);
  CORVID_CHECK(w.ndim == 2, "ops::matmul: weight must be 2-D [m, k], got ", w.shape_str());
  CORVID_CHECK(is_weight_dtype_on(w.dtype, device), "ops::matmul: unsupported weight dtype ", dtype_name(w.dtype),
               " on ", device_name(device));
  CORVID_CHECK(x.cols() == w.cols(), "ops::matmul: x ", x.shape_str(), " and weight ", w.shape_str(),
               " differ in the inner dimension");
  CORVID_CHECK(out.rows() == x.rows() && out.cols() == w.rows(), "ops::matmul: out ", out.shape_str(), " must be [",
               x.rows(), ", ", w.rows(), "]");
  const int block = dtype_info(w.dtype).block_elems;
  CORVID_CHECK(w.cols() % block == 0, "ops::matmul: ", dtype_name(w.dtype), " weight row of ", w.cols(),
               " elements is not a whole number of ", block, "-element blocks");
  CORVID_CHECK(!overlaps(x, out), "ops::matmul: out must not alias x");
  if (bias) {
    CORVID_CHECK(is_float_dtype(bias->dtype) && bias->numel() == w.rows(), "ops::matmul: bias ", bias->shape_str(), " ",
                 dtype_name(bias->dtype), " must be [", w.rows(), "] F32/F16/BF16");
  }
}

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor* bias) {
  const Device device = common_device("matmul", {&x, &w, &out, bias});
  check_matmul_args(x, w, out, bias);
  if (x.rows() == 0 || w.rows() == 0) return;
  CORVID_DISPATCH(device, matmul, x, w, out, bias);
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const Device device = common_device("rms_norm", {&x, &weight, &out});
  check_f32("rms_norm", "x", x);
  check_f32("rms_norm", "out", out);
  check_same_shape("rms_norm", "x", x, "out", out);
  CORVID_CHECK(is_float_dtype(weight.dtype) && weight.numel() == x.cols(), "ops::rms_norm: weight ", weight.shape_str(),
               " ", dtype_name(weight.dtype), " must be [", x.cols(), "] F32/F16/BF16");
  CORVID_DISPATCH(device, rms_norm, x, weight, eps, out);
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
  const Device device = common_device("layer_norm", {&x, &weight, &bias, &out});
  check_f32("layer_norm", "x", x);
  check_f32("layer_norm", "out", out);
  check_same_shape("layer_norm", "x", x, "out", out);
  CORVID_CHECK(weight.dtype == DType::F32 && weight.numel() == x.cols() && bias.dtype == DType::F32 &&
                   bias.numel() == x.cols(),
               "ops::layer_norm: weight ", weight.shape_str(), " and bias ", bias.shape_str(), " must be [", x.cols(),
               "] F32");
  if (x.numel() == 0) return;
  CORVID_DISPATCH(device, layer_norm, x, weight, bias, eps, out);
}

void gelu(const Tensor& x) {
  const Device device = common_device("gelu", {&x});
  check_f32("gelu", "x", x);
  if (x.numel() == 0) return;
  CORVID_DISPATCH(device, gelu, x);
}

namespace {

void check_rope_args(const char* op, const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) {
  check_f32(op, "x", x);
  CORVID_CHECK(x.ndim == 3, "ops::", op, ": x must be [n, heads, head_dim], got ", x.shape_str());
  CORVID_CHECK(static_cast<int64_t>(positions.size()) == x.dim(0), "ops::", op, ": ", positions.size(),
               " positions for ", x.dim(0), " tokens");
  CORVID_CHECK(params.rotary_dim > 0 && params.rotary_dim % 2 == 0 && params.rotary_dim <= x.dim(2), "ops::", op,
               ": rotary_dim ", params.rotary_dim, " must be even and in (0, head_dim=", x.dim(2), "]");
  CORVID_CHECK(static_cast<int>(params.inv_freq.size()) == params.rotary_dim / 2, "ops::", op, ": ",
               params.inv_freq.size(), " inverse frequencies for rotary_dim ", params.rotary_dim);
}

// store_kv's arguments: k and v [n, kv_heads, head_dim] F32, caches of a KV cache dtype
// holding whole rows of them, one row index per token.
void check_store_kv_args(const char* op, Device device, const Tensor& k, const Tensor& v,
                         std::span<const int32_t> rows, const Tensor& k_cache, const Tensor& v_cache) {
  check_f32(op, "k", k);
  check_f32(op, "v", v);
  check_kv_caches(op, device, k_cache, v_cache);
  CORVID_CHECK(k.ndim == 3 && v.ndim == 3 && k.shape == v.shape, "ops::", op, ": k ", k.shape_str(), " and v ",
               v.shape_str(), " must both be [n, kv_heads, head_dim]");
  const int64_t row_elems = k.dim(1) * k.dim(2);
  CORVID_CHECK(k_cache.shape == v_cache.shape && row_elems > 0 && k_cache.numel() % row_elems == 0, "ops::", op,
               ": caches ", k_cache.shape_str(), " and ", v_cache.shape_str(), " must be rows of ", row_elems,
               " values, the same number each");
  CORVID_CHECK(static_cast<int64_t>(rows.size()) == k.dim(0), "ops::", op, ": ", rows.size(), " cache rows for ",
               k.dim(0), " tokens");
  const int64_t cache_rows = k_cache.numel() / row_elems;
  for (int32_t r : rows)
    CORVID_CHECK(r < cache_rows, "ops::", op, ": cache row ", r, " is outside the cache (", cache_rows, " rows)");
}

// rope_store_kv's arguments (rope_store_kv_attention's too, with rows = positions).
void check_rope_store_kv_args(const char* op, Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                              std::span<const int32_t> positions, const RopeParams& params,
                              std::span<const int32_t> rows, const Tensor& k_cache, const Tensor& v_cache) {
  check_f32(op, "q", q);
  CORVID_CHECK(q.ndim == 3 && k.ndim == 3 && q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), "ops::", op, ": q ",
               q.shape_str(), " and k ", k.shape_str(), " must be [n, heads, head_dim] with the same n and head_dim");
  check_store_kv_args(op, device, k, v, rows, k_cache, v_cache);
  CORVID_CHECK(rows.size() == positions.size(), "ops::", op, ": ", rows.size(), " cache rows for ", positions.size(),
               " positions");
  check_rope_args(op, q, positions, params);
}

}  // namespace

void rope(const Tensor& x, const Indices& positions, const RopeParams& params) {
  const Device device = common_device("rope", {&x});
  check_rope_args("rope", x, positions, params);
  CORVID_DISPATCH(device, rope, x, positions, params);
}

void rope_store_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                   const RopeParams& params, const Indices& rows, const Tensor& k_cache,
                   const Tensor& v_cache) {
  const Device device = common_device("rope_store_kv", {&q, &k, &v, &k_cache, &v_cache});
  check_rope_store_kv_args("rope_store_kv", device, q, k, v, positions, params, rows, k_cache, v_cache);
#ifdef CORVID_HAVE_CUDA
  if (device == Device::CUDA) {
    cuda::OpScope scope("rope_store_kv");
    cuda::rope_store_kv(q, k, v, positions, params, rows, k_cache, v_cache);
    return;
  }
#endif
  (void)device;
  cpu::rope(q, positions, params);
  cpu::rope(k, positions, params);
  cpu::store_kv(k, v, rows, k_cache, v_cache);
}

void store_kv(const Tensor& k, const Tensor& v, const Indices& rows, const Tensor& k_cache, const Tensor& v_cache) {
  const Device device = common_device("store_kv", {&k, &v, &k_cache, &v_cache});
  check_store_kv_args("store_kv", device, k, v, rows, k_cache, v_cache);
  if (rows.empty()) return;
  CORVID_DISPATCH(device, store_kv, k, v, rows, k_cache, v_cache);
}

// act(gate) * up's checks (silu_mul, gelu_tanh_mul): three F32 tensors of one shape, one device.
static Device check_gated_mul(const char* op, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Device device = common_device(op, {&gate, &up, &out});
  check_f32(op, "gate", gate);
  check_f32(op, "up", up);
  check_f32(op, "out", out);
  check_same_shape(op, "gate", gate, "up", up);
  check_same_shape(op, "gate", gate, "out", out);
  return device;
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Device device = check_gated_mul("silu_mul", gate, up, out);
  CORVID_DISPATCH(device, silu_mul, gate, up, out);
}

void matmul_glu(const Tensor& x, const Tensor& w, const Tensor& gate_up, const Tensor& out, GatedActivation act) {
  const Device device = common_device("matmul_glu", {&x, &w, &gate_up, &out});
  check_f32("matmul_glu", "gate_up", gate_up);
  check_f32("matmul_glu", "out", out);
  CORVID_CHECK(x.ndim == 2 && x.rows() == 1, "ops::matmul_glu: x ", x.shape_str(), " must be one row [1, k]");
  CORVID_CHECK(w.ndim == 2 && w.rows() % 2 == 0, "ops::matmul_glu: weight ", w.shape_str(),
               " must be [2 * I, k]: the gate rows, then the up rows");
  const int64_t half = w.rows() / 2;
  CORVID_CHECK(gate_up.numel() == w.rows() && out.numel() == half, "ops::matmul_glu: gate_up ",
               gate_up.shape_str(), " and out ", out.shape_str(), " must be [1, ", w.rows(), "] and [1, ", half, "]");
  CORVID_CHECK(!overlaps(gate_up, out) && !overlaps(x, out), "ops::matmul_glu: out must not alias x or gate_up");
  const Tensor products = gate_up.reshaped({1, w.rows()});
  check_matmul_args(x, w, products, nullptr);  // as the matmul into gate_up
#ifdef CORVID_HAVE_CUDA
  if (device == Device::CUDA && cuda::matmul_glu_fuses(x, w, out)) {
    cuda::OpScope scope("matmul");
    cuda::matmul_glu(x, w, out, act);
    return;
  }
#endif
  matmul(x, w, products);
  const auto half_of = [&](int64_t i) { return Tensor(DType::F32, {1, half}, products.ptr<float>() + i * half, device); };
  if (act == GatedActivation::GeluTanh) {
    gelu_tanh_mul(half_of(0), half_of(1), out.reshaped({1, half}));
  } else {
    silu_mul(half_of(0), half_of(1), out.reshaped({1, half}));
  }
}

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Device device = check_gated_mul("gelu_tanh_mul", gate, up, out);
  CORVID_DISPATCH(device, gelu_tanh_mul, gate, up, out);
}

void scale(const Tensor& x, float s) {
  const Device device = common_device("scale", {&x});
  check_f32("scale", "x", x);
  CORVID_DISPATCH(device, scale, x, s);
}

void gather_columns(const Tensor& x, int64_t offset, const Tensor& out) {
  const Device device = common_device("gather_columns", {&x, &out});
  check_f32("gather_columns", "x", x);
  check_f32("gather_columns", "out", out);
  CORVID_CHECK(x.rows() == out.rows() && offset >= 0 && offset + out.cols() <= x.cols(), "ops::gather_columns: ",
               out.shape_str(), " from column ", offset, " of ", x.shape_str());
  CORVID_CHECK(!overlaps(x, out), "ops::gather_columns: out overlaps x");
  CORVID_DISPATCH(device, gather_columns, x, offset, out);
}

void im2col_1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t pad, const Tensor& out) {
  const Device device = common_device("im2col_1d", {&x, &out});
  check_f32("im2col_1d", "x", x);
  check_f32("im2col_1d", "out", out);
  CORVID_CHECK(kernel > 0 && stride > 0 && pad >= 0 && x.ndim == 2 && out.ndim == 2, "ops::im2col_1d: kernel ", kernel,
               ", stride ", stride, ", pad ", pad, " over ", x.shape_str());
  const int64_t t_out = (x.dim(0) + 2 * pad - kernel) / stride + 1;
  CORVID_CHECK(out.dim(0) == t_out && out.dim(1) == x.dim(1) * kernel, "ops::im2col_1d: out must be [", t_out, ", ",
               x.dim(1) * kernel, "], got ", out.shape_str());
  CORVID_CHECK(!overlaps(x, out), "ops::im2col_1d: out overlaps x");
  CORVID_DISPATCH(device, im2col_1d, x, kernel, stride, pad, out);
}

void softcap(const Tensor& x, float cap) {
  const Device device = common_device("softcap", {&x});
  check_f32("softcap", "x", x);
  CORVID_CHECK(cap > 0 && std::isfinite(cap), "ops::softcap: cap must be positive, got ", cap);
  CORVID_DISPATCH(device, softcap, x, cap);
}

static void hadamard(const char* op, const Tensor& x, bool inverse) {
  const Device device = common_device(op, {&x});
  check_f32(op, "x", x);
  CORVID_CHECK(x.ndim == 3, "ops::", op, ": x must be [n, heads, head_dim], got ", x.shape_str());
  const int64_t d = x.dim(2);
  CORVID_CHECK(d > 0 && (d & (d - 1)) == 0, "ops::", op, ": head_dim ", d, " is not a power of 2");
  CORVID_DISPATCH(device, hadamard_rotate, x, inverse);
}

void hadamard_rotate(const Tensor& x) { hadamard("hadamard_rotate", x, false); }
void hadamard_unrotate(const Tensor& x) { hadamard("hadamard_unrotate", x, true); }

void add(const Tensor& x, const Tensor& y) {
  const Device device = common_device("add", {&x, &y});
  check_f32("add", "x", x);
  check_f32("add", "y", y);
  check_same_shape("add", "x", x, "y", y);
  CORVID_DISPATCH(device, add, x, y);
}

void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& weight, float eps, const Tensor& out) {
  const Device device = common_device("add_rms_norm", {&x, &y, &weight, &out});
  check_f32("add_rms_norm", "x", x);
  check_f32("add_rms_norm", "y", y);
  check_f32("add_rms_norm", "out", out);
  check_same_shape("add_rms_norm", "x", x, "y", y);
  check_same_shape("add_rms_norm", "x", x, "out", out);
  CORVID_CHECK(is_float_dtype(weight.dtype) && weight.numel() == x.cols(), "ops::add_rms_norm: weight ",
               weight.shape_str(), " ", dtype_name(weight.dtype), " must be [", x.cols(), "] F32/F16/BF16");
#ifdef CORVID_HAVE_CUDA
  if (device == Device::CUDA) {
    cuda::OpScope scope("add_rms_norm");
    cuda::add_rms_norm(x, y, weight, eps, out);
    return;
  }
#endif
  (void)device;
  cpu::add(x, y);
  cpu::rms_norm(x, weight, eps, out);
}

namespace {

// What attention and paged_attention share: q [n, heads, head_dim] F32 and a K/V store
// [rows, kv_heads, head_dim] of a KV cache dtype (check_kv_caches), heads a multiple of
// kv_heads, out shaped as q, one position per query.
void check_attention_args(const char* op, Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                          std::span<const int32_t> positions, const Tensor& out) {
  check_f32(op, "q", q);
  check_kv_caches(op, device, k, v);
  check_f32(op, "out", out);
  CORVID_CHECK(q.ndim == 3, "ops::", op, ": q must be [n, n_heads, head_dim], got ", q.shape_str());
  CORVID_CHECK(k.ndim == 3 && v.ndim == 3 && k.shape == v.shape, "ops::", op, ": keys ", k.shape_str(),
               " and values ", v.shape_str(), " must both be [rows, n_kv_heads, head_dim]");
  CORVID_CHECK(k.dim(2) == q.dim(2), "ops::", op, ": head_dim of q ", q.shape_str(), " and keys ", k.shape_str(),
               " differ");
  CORVID_CHECK(k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, "ops::", op, ": ", q.dim(1),
               " query heads are not a multiple of ", k.dim(1), " kv heads");
  CORVID_CHECK(out.ndim == 3 && out.shape == q.shape, "ops::", op, ": out ", out.shape_str(), " must match q ",
               q.shape_str());
  CORVID_CHECK(!overlaps(q, out), "ops::", op, ": out must not alias q");
  CORVID_CHECK(static_cast<int64_t>(positions.size()) == q.dim(0), "ops::", op, ": ", positions.size(),
               " positions for ", q.dim(0), " queries");
}

// Every position a row of a contiguous cache (the row is the position); negative ones
// (a query that sees no key of this part) only when lse is asked for.
void check_positions_in_cache(const char* op, std::span<const int32_t> positions, const Tensor& k_cache,
                              bool negative_ok = false) {
  for (int32_t p : positions) {
    CORVID_CHECK((p >= 0 || negative_ok) && p < k_cache.dim(0), "ops::", op, ": position ", p,
                 " outside the cache capacity ", k_cache.dim(0));
  }
}

void check_lse(const char* op, const Tensor& q, const Tensor* lse) {
  if (!lse) return;
  check_f32(op, "lse", *lse);
  CORVID_CHECK(lse->numel() == q.dim(0) * q.dim(1) && lse->device == q.device, "ops::", op, ": lse ",
               lse->shape_str(), " must hold [", q.dim(0), ", ", q.dim(1), "] on the queries' device");
}

}  // namespace

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Indices& positions,
               float scale, int64_t window, const Tensor& out, const Tensor* lse) {
  const Device device = common_device("attention", {&q, &k_cache, &v_cache, &out});
  check_attention_args("attention", device, q, k_cache, v_cache, positions, out);
  check_positions_in_cache("attention", positions, k_cache, lse != nullptr);
  check_lse("attention", q, lse);
  if (q.numel() == 0) return;
  CORVID_DISPATCH(device, attention, q, k_cache, v_cache, positions, scale, window, out, lse);
}

void merge_attention(const Tensor& out, const Tensor& lse, const Tensor& other, const Tensor& other_lse) {
  const Device device = common_device("merge_attention", {&out, &lse, &other, &other_lse});
  for (const Tensor* t : {&out, &lse, &other, &other_lse}) check_f32("merge_attention", "input", *t);
  CORVID_CHECK(out.ndim == 3 && other.shape == out.shape, "ops::merge_attention: outputs ", out.shape_str(), " and ",
               other.shape_str(), " must both be [n, n_heads, head_dim]");
  CORVID_CHECK(lse.numel() == out.dim(0) * out.dim(1) && other_lse.numel() == lse.numel(),
               "ops::merge_attention: log-sum-exps ", lse.shape_str(), " and ", other_lse.shape_str(),
               " must hold [n, n_heads] of ", out.shape_str());
  if (out.numel() == 0) return;
  CORVID_DISPATCH(device, merge_attention, out, lse, other, other_lse);
}

void rope_store_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& positions,
                             const RopeParams& params, const Tensor& k_cache, const Tensor& v_cache, float scale,
                             int64_t window, const Tensor& out) {
#ifdef CORVID_HAVE_CUDA
  const Device device = common_device("rope_store_kv_attention", {&q, &k, &v, &k_cache, &v_cache, &out});
  if (device == Device::CUDA) {
    // The checks of both ops (rows = positions), then one kernel where it applies, which
    // writes k's heads where the cache keeps them.
    const char* op = "rope_store_kv_attention";
    check_rope_store_kv_args(op, device, q, k, v, positions, params, positions, k_cache, v_cache);
    check_attention_args(op, device, q, k_cache, v_cache, positions, out);
    check_positions_in_cache(op, positions, k_cache);
    CORVID_CHECK(k.dim(1) == k_cache.dim(1), "ops::", op, ": k ", k.shape_str(), " must have the cache's ",
                 k_cache.dim(1), " kv heads");
    if (cuda::rope_store_kv_attention_fuses(q, k_cache)) {
      cuda::OpScope scope("attention");  // (otherwise the two ops below time themselves)
      cuda::rope_store_kv_attention(q, k, v, positions, params, k_cache, v_cache, scale, window, out);
      return;
    }
  }
#endif
  rope_store_kv(q, k, v, positions, params, positions, k_cache, v_cache);
  attention(q, k_cache, v_cache, positions, scale, window, out);
}

void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const PagedKV& paged,
                     const Indices& positions, float scale, int64_t window, const Tensor& out, const Tensor* lse) {
  const Device device = common_device("paged_attention", {&q, &k_pool, &v_pool, &out});
  check_attention_args("paged_attention", device, q, k_pool, v_pool, positions, out);
  check_lse("paged_attention", q, lse);
  const int64_t bs = paged.block_size;
  CORVID_CHECK(bs > 0 && k_pool.dim(0) % bs == 0, "ops::paged_attention: pool of ", k_pool.dim(0),
               " rows is not a whole number of ", bs, "-position blocks");
  const int64_t num_blocks = k_pool.dim(0) / bs;
  CORVID_CHECK(paged.max_blocks > 0 && static_cast<int64_t>(paged.block_tables.size()) % paged.max_blocks == 0,
               "ops::paged_attention: ", paged.block_tables.size(), " block table entries are not rows of ",
               paged.max_blocks);
  const int64_t n_seqs = static_cast<int64_t>(paged.block_tables.size()) / paged.max_blocks;
  CORVID_CHECK(static_cast<int64_t>(paged.query_seq.size()) == q.dim(0), "ops::paged_attention: ",
               paged.query_seq.size(), " sequence indices for ", q.dim(0), " queries");
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t seq = paged.query_seq[i], pos = positions[i];
    CORVID_CHECK(seq >= 0 && seq < n_seqs, "ops::paged_attention: query ", i, " names sequence ", seq, " of ", n_seqs);
    CORVID_CHECK((pos >= 0 || lse) && pos / bs < paged.max_blocks, "ops::paged_attention: position ", pos,
                 " outside the block table (", paged.max_blocks, " blocks of ", bs, ")");
    if (pos < 0) continue;  // sees no key of this part
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) / bs : 0;
    for (int64_t b = first; b <= pos / bs; ++b) {
      const int32_t block = paged.block_tables[static_cast<size_t>(seq * paged.max_blocks + b)];
      CORVID_CHECK(block >= 0 && block < num_blocks, "ops::paged_attention: sequence ", seq, " block ", b, " is ",
                   block, ", outside the pool of ", num_blocks, " blocks");
    }
  }
  if (q.numel() == 0) return;
  CORVID_DISPATCH(device, paged_attention, q, k_pool, v_pool, paged, positions, scale, window, out, lse);
}

int64_t max_attention_head_dim(Device device) {
#ifdef CORVID_HAVE_CUDA
  if (device == Device::CUDA) return cuda::max_attention_head_dim();
#endif
  (void)device;
  return INT64_MAX;  // the CPU kernels take any head size
}

void softmax(const Tensor& x) {
  const Device device = common_device("softmax", {&x});
  check_f32("softmax", "x", x);
  CORVID_DISPATCH(device, softmax, x);
}

bool kv_cache_dtype_supported(DType t, Device device) {
  return t == DType::F32 || ((t == DType::F16 || t == DType::BF16) && device == Device::CUDA) || kv_codec::is_coded(t);
}

bool kv_cache_pair_supported(DType k, DType v, Device device) {
  if (!kv_cache_dtype_supported(k, device) || !kv_cache_dtype_supported(v, device)) return false;
  if (k == v) return true;
  if (!kv_codec::is_coded(k) || !kv_codec::is_coded(v)) return false;
  if (device == Device::CPU) return true;
  // The GPU instantiates TurboQuant's pairs whose values have fewer bits than the keys.
  auto bits = [](DType t) { return t == DType::A8G64 ? 8 : kv_turbo::is_turbo(t) ? kv_turbo::bits_of(t) : 0; };
  return kv_turbo::is_turbo(v) && bits(k) > bits(v);
}

DType device_weight_dtype(const Tensor& w, Device device) {
  // CORVID_NO_DIRECT_GEMV=1 (A/B runs) keeps the GGUF layouts, with the GEMVs made for them.
  static const bool keep_layouts = env_flag("CORVID_NO_DIRECT_GEMV");
  // Exact numerics multiply F32 activations in the tiled GEMVs, which read the GGUF
  // layouts (a row layout would fall to the value-by-value kernels there).
  if (device != Device::CUDA || keep_layouts || quantized_matmul() == QuantizedMatmul::Exact || w.ndim != 2 ||
      w.row_bytes() % 16 != 0)
    return w.dtype;
  switch (w.dtype) {
    case DType::Q4_0: return DType::Q4_0R;
    case DType::Q4_1: return DType::Q4_1R;
    case DType::Q8_0: return DType::Q8_0R;
    case DType::Q4_K: return DType::Q4_KR;
    default: return w.dtype;
  }
}

DType stored_weight_dtype(DType t) {
  switch (t) {
    case DType::Q4_0R: return DType::Q4_0;
    case DType::Q4_1R: return DType::Q4_1;
    case DType::Q8_0R: return DType::Q8_0;
    case DType::Q4_KR: return DType::Q4_K;
    default: return t;
  }
}

void reset_op_times() {
#ifdef CORVID_HAVE_CUDA
  cuda::reset_op_times();
#endif
}

void rearrange_weight(const Tensor& raw, const Tensor& dst) {
  const Device device = common_device("rearrange_weight", {&raw, &dst});
  CORVID_CHECK(device == Device::CUDA && raw.ndim == 2 && dst.ndim == 2 && raw.shape == dst.shape &&
                   dst.dtype == device_weight_dtype(raw, device) && dst.dtype != raw.dtype,
               "ops::rearrange_weight: a 2-D ", dtype_name(raw.dtype), " ", raw.shape_str(), " on ",
               device_name(raw.device), " cannot become ", dtype_name(dst.dtype), " ", dst.shape_str());
  CORVID_CHECK(!overlaps(raw, dst), "ops::rearrange_weight: dst must not alias raw");
#ifdef CORVID_HAVE_CUDA
  cuda::count_op();
  cuda::rearrange_weight(raw, dst);
#endif
}

void quantize_row(DType t, const float* src, void* dst, int64_t k) {
  switch (t) {
    case DType::F32:
      std::copy(src, src + k, static_cast<float*>(dst));
      return;
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    default:
      CORVID_CHECK(is_weight_dtype(t), "quantize_row: ", dtype_name(t), " is not a weight dtype");
      bytes_for(t, k);  // throws unless k is a whole number of blocks
      cpu::quant_kernels(t).quantize(src, dst, k);
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t k) {
  CORVID_CHECK(is_weight_dtype(t), "dequantize_row: ", dtype_name(t), " is not a weight dtype");
  bytes_for(t, k);  // throws unless k is a whole number of blocks
  cpu::dequantize_row(t, src, dst, k);
}

}  // namespace corvid::ops
