// KvFormat: how a layer's keys and values are stored. A plain format keeps both in one
// element type (f32, bf16, q8, fp8, ...); --kv-rotate stores keys in the rotated basis of
// ops::hadamard_rotate; TurboQuant (turbo:kXvY) gives keys and values their own code
// widths and stores both rotated, so scores are taken in the rotated domain (queries
// are rotated once) and each attention output is rotated back once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "corvid/core/dtype.h"

namespace corvid {

struct KvFormat {
  DType keys = DType::F32;
  DType values = DType::F32;
  bool rotate_keys = false;    // queries and keys rotated before the cache
  bool rotate_values = false;  // values rotated before the cache, attention outputs rotated back

  KvFormat() = default;
  // A plain dtype is a format: keys and values of that type, unrotated.
  KvFormat(DType t) : keys(t), values(t) {}  // NOLINT(google-explicit-constructor)
  KvFormat(DType k, DType v, bool rk, bool rv) : keys(k), values(v), rotate_keys(rk), rotate_values(rv) {}
  bool operator==(const KvFormat&) const = default;

  bool rotated() const { return rotate_keys || rotate_values; }
  // Bytes of one position's keys plus values over `elems` = kv_heads * head_dim values each.
  int64_t bytes_per_position(int64_t elems) const;
};

// Whether a format codes its keys or values (q8, q4, fp8, turbo: not f32 / f16 / bf16);
// the delayed switch (--kv-quant-start) applies to these.
bool kv_format_coded(const KvFormat& f);
// The delayed switch's format for a coded layer's first positions: keys and values of
// `plain` (bf16 on CUDA, f32 on the CPU), rotated as `coded` rotates them, so that one
// rotated query reads both parts and both outputs come back in one basis.
KvFormat kv_head_format(const KvFormat& coded, DType plain);

// The format a name gives: f32, f16, bf16, q8, q4, q8_g32, q4_g32, fp8, or turbo:kXvY
// (X, Y in 8, 4, 3, 2: TurboQuant codes of X bits for keys and Y for values, 8 being
// affine int8 in the rotated basis); nothing for another name.
std::optional<KvFormat> kv_format_from_name(const std::string& name);
// The plain formats' names, then "turbo:kXvY" for every pair.
const std::vector<std::string>& kv_format_names();
// What kv_format_from_name reads back: "q4", "turbo:k4v3"; a plain format rotated by
// --kv-rotate is "q4 rotated".
std::string kv_format_name(const KvFormat& f);

}  // namespace corvid
