// Uploading weights to the GPU (engine/loaded_model.cc upload_weights): Q4_0, Q4_1, Q8_0
// and Q4_K matrices with 16-byte rows become the GPU row layouts (ops::device_weight_dtype),
// the rest keep their GGUF format, and every op reading a rearranged weight sees the
// same values: the embedding rows are bit-identical to the CPU's, and a decode step's
// logits match the CPU model. The GEMVs on the layouts are checked in cuda_dp4a_test.cc.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "corvid/core/buffer.h"
#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::f32_tensor;
using testing::make_weight;
using testing::random_floats;
using testing::to_gpu;
using testing::to_host;

TEST(CudaRowLayout, UploadRearrangesAndEmbeddingRowsStayExact) {
  SKIP_WITHOUT_GPU();
  struct Case {
    const char* name;
    DType stored, on_gpu;
    int64_t rows, cols;
  };
  const Case cases[] = {{"a.q4_0", DType::Q4_0, DType::Q4_0R, 37, 4096},
                        {"b.q4_1", DType::Q4_1, DType::Q4_1R, 5, 1536},
                        {"c.q8_0", DType::Q8_0, DType::Q8_0R, 9, 2304},
                        {"d.q4_1_narrow", DType::Q4_1, DType::Q4_1, 6, 576},
                        {"e.q4_k", DType::Q4_K, DType::Q4_KR, 3, 512},
                        {"f.q4_k_wide", DType::Q4_K, DType::Q4_KR, 4, 4096},
                        {"g.q6_k", DType::Q6_K, DType::Q6_K, 2, 512}};
  WeightSet host;
  host.source = "test";
  std::vector<std::unique_ptr<OwnedTensor>> keep;
  uint32_t seed = 11;
  for (const Case& c : cases) {
    keep.push_back(std::make_unique<OwnedTensor>(
        make_weight(c.stored, c.rows, c.cols, random_floats(static_cast<size_t>(c.rows * c.cols), seed++))));
    host.tensors[c.name] = keep.back()->tensor;
  }
  const WeightSet gpu = upload_weights(host, Device::CUDA);
  for (const Case& c : cases) {
    const Tensor& g = gpu.get(c.name);
    EXPECT_EQ(g.dtype, c.on_gpu) << c.name;
    EXPECT_EQ(g.device, Device::CUDA);
    EXPECT_EQ(g.shape, host.get(c.name).shape);
    // Every row, in a scrambled order, through the embedding op on both devices.
    std::vector<int32_t> ids;
    for (int64_t r = c.rows - 1; r >= 0; r -= 2) ids.push_back(static_cast<int32_t>(r));
    for (int64_t r = 0; r < c.rows; r += 2) ids.push_back(static_cast<int32_t>(r));
    const int64_t n = static_cast<int64_t>(ids.size());
    OwnedTensor cpu_out = f32_tensor({n, c.cols}, std::vector<float>(static_cast<size_t>(n * c.cols)));
    ops::embedding(host.get(c.name), ids, cpu_out.tensor);
    DeviceTensor gpu_out(Device::CUDA, DType::F32, {n, c.cols});
    ops::embedding(g, ids, gpu_out.tensor);
    const std::vector<float> got = to_host(gpu_out.tensor);
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += !(got[i] == cpu_out.ptr<float>()[i]);
    EXPECT_EQ(mismatches, 0u) << c.name;
  }
  // A staging buffer smaller than one row (so one row a chunk) and one of three rows
  // (chunks of 3, the last one short) lay out every tensor byte for byte as the default.
  for (size_t staging : {size_t{1000}, size_t{3} * 2304}) {
    const WeightSet chunked = upload_weights(host, Device::CUDA, staging);
    for (const Case& c : cases) {
      const Tensor& a = gpu.get(c.name);
      const Tensor& b = chunked.get(c.name);
      ASSERT_EQ(a.dtype, b.dtype) << c.name;
      std::vector<uint8_t> want(a.nbytes()), got(b.nbytes());
      copy_bytes(want.data(), Device::CPU, a.data, Device::CUDA, want.size());
      copy_bytes(got.data(), Device::CPU, b.data, Device::CUDA, got.size());
      EXPECT_EQ(got, want) << c.name << " staged through " << staging << " bytes";
    }
  }
}

TEST(CudaRowLayout, RearrangeRejectsWhatHasNoLayout) {
  SKIP_WITHOUT_GPU();
  OwnedTensor w = make_weight(DType::Q6_K, 2, 256, random_floats(512, 3));
  DeviceTensor raw = to_gpu(w.tensor);
  DeviceTensor dst(Device::CUDA, DType::Q6_K, {2, 256});
  EXPECT_THROW(ops::rearrange_weight(raw.tensor, dst.tensor), Error);
  OwnedTensor q = make_weight(DType::Q4_0, 2, 256, random_floats(512, 4));
  DeviceTensor raw_q = to_gpu(q.tensor);
  DeviceTensor wrong(Device::CUDA, DType::Q8_0R, {2, 256});
  EXPECT_THROW(ops::rearrange_weight(raw_q.tensor, wrong.tensor), Error);
}

}  // namespace
}  // namespace corvid
