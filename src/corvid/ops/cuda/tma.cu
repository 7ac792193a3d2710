// Host side of tma.cuh: tensor maps through the driver's cuTensorMapEncodeTiled, found
// at run time (cudaGetDriverEntryPointByVersion) so that corvid links only the runtime.
#include <cudaTypedefs.h>

#include "corvid/core/error.h"
#include "corvid/ops/cuda/context.h"
#include "corvid/ops/cuda/tma.cuh"

namespace corvid::ops::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CORVID_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    CORVID_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr,
                 "CUDA: the driver has no cuTensorMapEncodeTiled (needed by the Hopper GEMM)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A 2-D map of `rows` rows of `cols` elements of `type`, `stride` bytes apart, read in
// tiles of box_rows x box_cols elements.
CUtensorMap encode_2d(CUtensorMapDataType type, const void* data, int64_t rows, int64_t cols, int64_t stride,
                      int box_cols, int box_rows, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encode_tiled()(&map, type, 2, const_cast<void*>(data), dims, strides, box, element_strides,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  CORVID_CHECK(r == CUDA_SUCCESS, "CUDA: cuTensorMapEncodeTiled failed (", static_cast<int>(r), ") for a ", rows,
               " x ", cols, " matrix, rows ", stride, " bytes apart");
  return map;
}

}  // namespace

CUtensorMap tma_matrix_16bit(const void* data, int64_t rows, int64_t cols, int box_rows) {
  CORVID_CHECK(reinterpret_cast<uintptr_t>(data) % 16 == 0 && cols % 8 == 0 && rows >= 1 && box_rows >= 1 &&
                   box_rows <= 256,
               "tma_matrix_16bit: unsupported matrix ", rows, " x ", cols, " (tiles of ", box_rows, " rows)");
  return encode_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, data, rows, cols, cols * 2, 64, box_rows,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

CUtensorMap tma_matrix_bytes(const void* data, int64_t rows, int64_t cols, int64_t stride, int box_cols, int box_rows) {
  CORVID_CHECK(reinterpret_cast<uintptr_t>(data) % 16 == 0 && stride % 16 == 0 && box_cols % 16 == 0 &&
                   box_cols >= 16 && box_cols <= 256 && box_rows >= 1 && box_rows <= 256 && rows >= 1 && cols >= 1 &&
                   cols <= stride,
               "tma_matrix_bytes: unsupported matrix ", rows, " x ", cols, " (stride ", stride, ", tiles of ", box_rows,
               " x ", box_cols, ")");
  return encode_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, data, rows, cols, stride, box_cols, box_rows,
                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

}  // namespace corvid::ops::cuda
