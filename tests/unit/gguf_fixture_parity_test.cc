// Tiny fixtures written as GGUF in llama.cpp's layout (tests/oracle/*_gguf.py: gemma4 with its
// per-layer arrays and rope_freqs, phi3 with longrope as rope_factors tensors, smollm3 with
// permuted q/k and llama.cpp's fixed NoPE layers),
// F32, against the transformers oracle of the safetensors fixture they were made from: every
// logit within 1e-3 and the same greedy continuations, as TinyParity holds the originals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class GgufFixtureParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixtureParity, LogitsAndGreedyMatchTransformers) {
  const fs::path dir = fixtures::fixtures_dir() / GetParam();
  const json oracle = fixtures::read_json(dir / "oracle.json");
  LoadedModel m = LoadedModel::load((dir / "model.gguf").string());
  const int64_t vocab = m.model->config().vocab_size;
  for (size_t p = 0; p < oracle["prompts"].size(); ++p) {
    const auto prompt = oracle["prompts"][p].get<std::vector<int32_t>>();
    Session session(*m.runner, static_cast<int64_t>(prompt.size()) + 1);
    const Tensor& logits = session.score(prompt);
    double worst = 0;
    for (size_t pos = 0; pos < prompt.size(); ++pos)
      for (int64_t v = 0; v < vocab; ++v)
        worst = std::max(worst, std::abs(logits.row<float>(static_cast<int64_t>(pos))[v] -
                                         oracle["logits"][p][pos][static_cast<size_t>(v)].get<double>()));
    EXPECT_LE(worst, 1e-3) << GetParam() << " prompt " << p;
    const auto want = oracle["greedy"][p].get<std::vector<int32_t>>();
    EXPECT_EQ(fixtures::greedy(*m.runner, prompt, static_cast<int64_t>(want.size())), want)
        << GetParam() << " prompt " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufFixtureParity, ::testing::Values("gemma4_gguf", "phi3_gguf", "smollm3_gguf"));

}  // namespace
}  // namespace corvid
