// Embeddings on the GPU: the BERT encoder (layer_norm, gelu, per-input attention on
// CUDA) and a decoder's last-token hidden states, each against the oracle and the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "corvid/engine/embedder.h"
#include "cuda_test_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> oracle_inputs(const nlohmann::json& oracle) {
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& ids : oracle["token_ids"]) inputs.push_back(ids.get<std::vector<int32_t>>());
  return inputs;
}

// GPU vectors within `atol` of the oracle's and of the CPU's, value by value.
void expect_gpu_matches(const fs::path& model, const fs::path& oracle_file, bool encoder, double atol) {
  SKIP_WITHOUT_GPU();
  const nlohmann::json oracle = fixtures::read_json(oracle_file);
  const std::vector<std::vector<int32_t>> inputs = oracle_inputs(oracle);
  LoadedModel gpu = LoadedModel::load(model.string(), Device::CUDA);
  LoadedModel cpu = LoadedModel::load(model.string(), Device::CPU);
  Embedder on_gpu(gpu, read_pooling(model.string(), encoder));
  Embedder on_cpu(cpu, read_pooling(model.string(), encoder));
  const std::vector<std::vector<float>> g = on_gpu.embed(inputs), c = on_cpu.embed(inputs);
  ASSERT_EQ(g.size(), inputs.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const std::vector<double> want = oracle["embeddings"][i].get<std::vector<double>>();
    for (size_t d = 0; d < want.size(); ++d) {
      EXPECT_NEAR(g[i][d], want[d], atol) << "input " << i << " dim " << d;
      EXPECT_NEAR(g[i][d], c[i][d], atol) << "input " << i << " dim " << d;
    }
  }
  // Batched or alone, the same vector up to the GPU's rounding.
  for (size_t i = 0; i < inputs.size(); i += 5) {
    const std::vector<float> alone = on_gpu.embed({inputs[i]})[0];
    for (size_t d = 0; d < alone.size(); ++d) EXPECT_NEAR(alone[d], g[i][d], 1e-5) << "input " << i;
  }
}

TEST(CudaEmbeddings, BertTinyEqualsSentenceTransformers) {
  const fs::path dir = fixtures::fixtures_dir() / "embeddings" / "bert_tiny";
  expect_gpu_matches(dir, dir / "oracle.json", true, 1e-5);
}

TEST(CudaEmbeddings, DecoderLastTokenEqualsTransformers) {
  expect_gpu_matches(fixtures::fixtures_dir() / "llama", fixtures::fixtures_dir() / "embeddings" / "llama_last_token.json",
                     false, 1e-4);
}

TEST(CudaEmbeddings, MiniLMEqualsSentenceTransformers) {
  const fs::path dir = fixtures::source_dir() / "models" / "all-MiniLM-L6-v2";
  if (!fs::exists(dir / "model.safetensors")) GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model minilm";
  expect_gpu_matches(dir, fixtures::fixtures_dir() / "embeddings" / "minilm.json", true, 1e-4);
}

}  // namespace
}  // namespace corvid
