#include "corvid/ops/kv_codec.h"

#include "corvid/core/error.h"
#include "corvid/ops/kv_affine.h"
#include "corvid/ops/kv_fp8.h"
#include "corvid/ops/kv_turbo.h"

namespace corvid::ops::kv_codec {

bool is_coded(DType t) { return t == DType::F8G64 || kv_affine::is_affine(t) || kv_turbo::is_turbo(t); }

int group_values(DType t) {
  CORVID_CHECK(is_coded(t), "kv_codec: ", dtype_name(t), " is not a coded KV format");
  return dtype_info(t).block_elems;
}

void encode(DType t, const float* x, int64_t n, uint8_t* dst) {
  if (t == DType::F8G64) return kv_fp8::quantize(x, n, dst);
  if (kv_turbo::is_turbo(t)) return kv_turbo::quantize(kv_turbo::bits_of(t), x, n, dst);
  kv_affine::quantize(t, x, n, dst);
}

void decode(DType t, const uint8_t* src, int64_t n, float* out) {
  if (t == DType::F8G64) return kv_fp8::dequantize(src, n, out);
  if (kv_turbo::is_turbo(t)) return kv_turbo::dequantize(kv_turbo::bits_of(t), src, n, out);
  kv_affine::dequantize(t, src, n, out);
}

}  // namespace corvid::ops::kv_codec
