// Rows [row, row + rows) of an F32 activation [n, heads * head_dim] seen as
// [rows, heads, head_dim], the shape the attention and KV ops take.
#pragma once

#include <cstdint>

#include "corvid/core/tensor.h"

namespace corvid {

inline Tensor heads_view(const Tensor& t, int64_t row, int64_t rows, int64_t heads, int64_t head_dim) {
  return Tensor(DType::F32, {rows, heads, head_dim}, t.row(row), t.device);
}

}  // namespace corvid
