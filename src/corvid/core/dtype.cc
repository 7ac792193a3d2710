#include "corvid/core/dtype.h"

#include "corvid/core/error.h"

namespace corvid {

const DTypeInfo& dtype_info(DType t) {
  // Block layouts follow ggml's definitions (ggml-common.h) so GGUF data is used in place.
  static const DTypeInfo kInfo[] = {
      {"F32", 1, 4},       {"F16", 1, 2},        {"BF16", 1, 2},       {"I32", 1, 4},
      {"Q4_0", 32, 18},    {"Q4_1", 32, 20},     {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
      {"Q8_0", 32, 34},    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},
      {"Q8_K", 256, 292},  {"Q8_1", 32, 36},
      {"Q4_0R", 32, 18},   {"Q4_1R", 32, 20},    {"Q8_0R", 32, 34},
      {"Q4_KR", 256, 144},
      {"q8_g64", 64, 68},  {"q4_g64", 64, 36},   {"q8_g32", 32, 36},   {"q4_g32", 32, 20},
      {"fp8", 64, 68},
      {"turbo4", 64, 36},  {"turbo3", 64, 28},   {"turbo2", 64, 20},
  };
  return kInfo[static_cast<int>(t)];
}

size_t bytes_for(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  CORVID_CHECK(n >= 0 && n % info.block_elems == 0, "dtype ", info.name, ": ", n,
               " elements is not a whole number of ", info.block_elems, "-element blocks");
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
}

}  // namespace corvid
