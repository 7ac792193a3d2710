// --moe-offload: routed experts in pinned host memory, read in place by the GPU. The
// kernels are the ones the resident experts run, over the same bytes, so an offloaded
// model's logits must equal the resident model's bit for bit: prompts (the grouped GEMM
// in Fast numerics, over the layer's stacks copied to the staging buffer: 24 tokens x
// top-2 are more pairs than the 8 experts; a wrong offset in that copy changes bits), eager and recorded decode steps (the GEMVs, int8 for the block
// formats), in both numerics modes. Runs only in -DCORVID_CUDA=ON builds; skips
// without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/engine/dummy_weights.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/ops/ops.h"
#include "cuda_test_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using fixtures::fixtures_dir;
using testing::NumericsScope;

// Three layers, the middle one dense (mlp_only_layers): sparse layers 0 and 2 are the
// model's MoE layers 0 and 1. Rows of 256 values keep every block format's GPU rows
// 16-byte aligned, so the int8 expert GEMVs take them.
constexpr const char* kConfig = R"({
  "model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 256,
  "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": true, "decoder_sparse_step": 1,
  "mlp_only_layers": [1], "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 64, "vocab_size": 512, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
  "tie_word_embeddings": false
})";

fs::path write_config() {
  const fs::path dir = fs::temp_directory_path() / "corvid_moe_offload";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << kConfig;
  return dir / "config.json";
}

int64_t first_layers_bytes(const Model& m, int layers) {
  const std::vector<int64_t> bytes = m.routed_expert_bytes();
  const size_t n = WeightPlacement(Device::CUDA, layers).offloaded_layers(bytes.size());
  return std::accumulate(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n), int64_t{0});
}

// The resident and the offloaded model on the same prompt and greedy continuation.
void expect_same_bits(LoadedModel& resident, LoadedModel& offloaded, const std::string& what) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 5) % 500);  // 24 > 8 rows: the prompt path
  for (ops::QuantizedMatmul mode : {ops::QuantizedMatmul::Fast, ops::QuantizedMatmul::Exact}) {
    NumericsScope scope(mode);
    const char* name = mode == ops::QuantizedMatmul::Fast ? "fast" : "exact";
    Session a(*resident.runner, 64), b(*offloaded.runner, 64);
    const Tensor& pa = a.score(prompt);
    const Tensor& pb = b.score(prompt);
    ASSERT_EQ(pa.nbytes(), pb.nbytes());
    EXPECT_EQ(0, std::memcmp(pa.data, pb.data, pa.nbytes())) << what << " " << name << ": prompt logits differ";
    Session c(*resident.runner, 64), d(*offloaded.runner, 64);
    GenerateOptions opts;
    opts.max_new_tokens = 16;
    std::vector<int32_t> tc, td;
    c.generate(prompt, opts, [&](int32_t id) { tc.push_back(id); return true; });
    d.generate(prompt, opts, [&](int32_t id) { td.push_back(id); return true; });
    EXPECT_EQ(tc, td) << what << " " << name;
    ASSERT_FALSE(tc.empty());
    const Tensor& lc = c.score(std::vector<int32_t>{tc.back()});
    const Tensor& ld = d.score(std::vector<int32_t>{td.back()});
    EXPECT_EQ(0, std::memcmp(lc.data, ld.data, lc.nbytes())) << what << " " << name << ": decode logits differ";
    EXPECT_EQ(resident.runner->step_recorded(), offloaded.runner->step_recorded()) << what;
  }
}

void expect_offloaded(const LoadedModel& m, int layers, const std::string& what) {
  const int64_t want = first_layers_bytes(*m.model, layers);
  ASSERT_GT(want, 0) << what;
  // Each projection's stack is one allocation, rounded up to 256 bytes.
  EXPECT_GE(m.model->host_mapped_weight_bytes(), want) << what;
  EXPECT_LT(m.model->host_mapped_weight_bytes(), want + 3 * 256 * 2) << what;
}

TEST(CudaMoeOffload, CheckpointsGiveTheResidentModelsBits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  // qwen3_moe: transformers 5's fused expert tensors; qwen2_moe: per-expert tensors and
  // a shared expert (which stays on the GPU); qwen3moe_gguf: llama.cpp's stacks.
  for (const char* name : {"qwen3_moe", "qwen2_moe", "qwen3moe_gguf/model.gguf"}) {
    const fs::path path = fixtures_dir() / name;
    if (!fs::exists(path)) continue;
    LoadedModel resident = LoadedModel::load(path.string(), Device::CUDA);
    EXPECT_EQ(resident.model->host_mapped_weight_bytes(), 0) << name;
    for (int layers : {1, WeightPlacement::kAllMoeLayers}) {
      LoadedModel offloaded = LoadedModel::load(path.string(), WeightPlacement(Device::CUDA, layers));
      expect_offloaded(offloaded, layers, name);
      expect_same_bits(resident, offloaded, std::string(name) + " offload " + std::to_string(layers));
    }
  }
}

TEST(CudaMoeOffload, BlockFormatsGiveTheResidentModelsBits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const fs::path config = write_config();
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::BF16}) {
    const std::string what(dtype_name(t));
    LoadedModel resident = load_dummy_model(config.string(), t, Device::CUDA);
    LoadedModel one = load_dummy_model(config.string(), t, WeightPlacement(Device::CUDA, 1));
    LoadedModel every = load_dummy_model(config.string(), t, WeightPlacement(Device::CUDA, 5));  // more than it has
    ASSERT_EQ(resident.model->routed_expert_bytes().size(), 2u) << what;
    expect_offloaded(one, 1, what);
    expect_offloaded(every, WeightPlacement::kAllMoeLayers, what);
    expect_same_bits(resident, one, what + " offload 1");
    expect_same_bits(resident, every, what + " offload all");
  }
}

}  // namespace
}  // namespace corvid
