// Element types of tensors: plain floats and ints, and GGUF block-quantized
// formats. Quantized types pack `block_elems` values into `block_bytes` bytes;
// a row of a quantized tensor must hold a whole number of blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace corvid {

enum class DType : uint8_t {
  F32, F16, BF16, I32,
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,  // 32-element blocks
  Q4_K, Q5_K, Q6_K,              // 256-element super-blocks
  Q8_K,                          // activation format for K-quant dot products (not stored in files)
  Q8_1,                          // activation format for Q4_1/Q5_1 dot products: Q8_0 plus d*sum(q)
  // GPU row layouts of Q4_0, Q4_1, Q8_0 and Q4_K (never in files): the same bytes per
  // row, rearranged at upload (ops::device_weight_dtype) so a row's quants lie back to
  // back (16 or 32 bytes per 32-value block, 16-byte aligned) followed by its blocks' f16
  // scales (Q4_1R: scale and minimum pairs; Q4_KR: each super-block's 16-byte header,
  // and its quants regrouped so 16 bytes hold one 32-value sub-block, low nibbles values
  // 0..15, high nibbles 16..31, as in Q4_0R). Decode GEMVs then read the quants with
  // 16-byte loads, which the 18/20/34-byte GGUF blocks do not allow. Only whole rows
  // have a byte size in these layouts; a sub-range of a row is not contiguous.
  Q4_0R, Q4_1R, Q8_0R, Q4_KR,
  // KV cache formats (never in files; ops/kv_affine.h): affine 8- or 4-bit codes in groups
  // of 64 or 32 values along head_dim, each group's codes followed by its f16 scale and
  // bias, as mlx's mx.quantize makes them; FP8 e4m3 codes in groups of 64 with an f32
  // scale (ops/kv_fp8.h); TurboQuant's 4-, 3- or 2-bit Lloyd-Max codes in groups of 64
  // with an f32 norm-correcting scale (ops/kv_turbo.h).
  A8G64, A4G64, A8G32, A4G32,
  F8G64,
  T4G64, T3G64, T2G64,
};

struct DTypeInfo {
  std::string_view name;
  int block_elems;   // 1 for plain types
  int block_bytes;   // bytes per block (element size for plain types)
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_quantized(DType t) { return dtype_info(t).block_elems > 1; }

// Bytes taken by `n` consecutive elements; throws corvid::Error when `n` is not
// a whole number of blocks.
size_t bytes_for(DType t, int64_t n);

}  // namespace corvid
