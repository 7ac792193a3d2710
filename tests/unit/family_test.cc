// Families beyond the oracle fixtures' TinyParity: the second oracle (mlx-lm),
// configs a family must refuse, and the opt-in real-weight checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/models/registry.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using fixtures::fixtures_dir;
using fixtures::read_json;

std::vector<std::string> mlx_fixtures() {
  std::vector<std::string> names;
  for (const std::string& n : fixtures::tiny_fixtures())
    if (fs::exists(fixtures_dir() / n / "mlx_oracle.json")) names.push_back(n);
  return names;
}

class MlxOracle : public ::testing::TestWithParam<std::string> {};

// tests/oracle/make_mlx_oracle.py: mlx-lm's greedy continuations of the same prompts.
TEST_P(MlxOracle, GreedyEqualsMlxLm) {
  const fs::path dir = fixtures_dir() / GetParam();
  const json oracle = read_json(dir / "mlx_oracle.json");
  LoadedModel m = LoadedModel::load(dir.string());
  for (size_t p = 0; p < oracle["prompts"].size(); ++p) {
    const auto prompt = oracle["prompts"][p].get<std::vector<int32_t>>();
    const auto want = oracle["greedy"][p].get<std::vector<int32_t>>();
    EXPECT_EQ(fixtures::greedy(*m.runner, prompt, static_cast<int64_t>(want.size())), want) << "prompt " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MlxOracle, ::testing::ValuesIn(mlx_fixtures()),
                         [](const auto& p) { return fixtures::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MlxOracle);

json gemma3_config() { return read_json(fixtures_dir() / "gemma3" / "config.json"); }

void expect_error(const json& config, const std::string& needle) {
  try {
    read_model_config(config, "g/config.json");
    ADD_FAILURE() << "no error; expected: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("g/config.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(Gemma3Config, MalformedConfigsAreOneLineErrors) {
  json c = gemma3_config();
  c["layer_types"] = {"sliding_attention", "full_attention"};  // 3 layers
  expect_error(c, "layer_types has 2 entries for 3 layers");
  c["layer_types"] = {"sliding_attention", "full_attention", "chunked_attention"};
  expect_error(c, "layer type 'chunked_attention' is not one of Gemma 3's");
  c = gemma3_config();
  c["attn_logit_softcapping"] = 50.0;
  expect_error(c, "attn_logit_softcapping is not supported");
  c = gemma3_config();
  c["use_bidirectional_attention"] = true;
  expect_error(c, "use_bidirectional_attention is not supported");
  c = gemma3_config();
  c["sliding_window"] = 0;
  expect_error(c, "sliding_window must be positive");
  c = gemma3_config();
  c["layer_types"] = "sliding_attention";
  expect_error(c, "field layer_types must be an array");
  c = gemma3_config();
  c["model_type"] = "gemma3";  // the multimodal wrapper, not the text model
  expect_error(c, "unsupported model_type 'gemma3' (supported: ");
}

TEST(Gemma3Config, LayerKindsFromThePatternOrTheList) {
  json c = gemma3_config();  // sliding_window_pattern 2 over 3 layers
  EXPECT_EQ(read_model_config(c, "g").layer_types,
            (std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention"}));
  c.erase("sliding_window_pattern");  // transformers' default pattern is 6
  EXPECT_EQ(read_model_config(c, "g").layer_types,
            (std::vector<std::string>{"sliding_attention", "sliding_attention", "sliding_attention"}));
  LoadedModel m = LoadedModel::load((fixtures_dir() / "gemma3").string());
  const std::vector<LayerState>& spec = m.model->state_spec();
  ASSERT_EQ(spec.size(), 3u);
  EXPECT_EQ(spec[0].kind, StateKind::SlidingKV);
  EXPECT_EQ(spec[0].window, 16);
  EXPECT_EQ(spec[1].kind, StateKind::FullKV);
}

// Opt-in (CORVID_REAL_WEIGHTS=1, after scripts/fetch-model.sh --model NAME): a real GGUF's
// greedy continuations equal transformers' on the dequantized model
// (tests/fixtures/real/*.json, README there), with corvid in exact numerics.
std::vector<std::string> real_references() {
  std::vector<std::string> names;
  const fs::path dir = fixtures_dir() / "real";
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") names.push_back(e.path().stem());
  std::sort(names.begin(), names.end());
  return names;
}

class RealWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(RealWeights, GreedyEqualsTransformers) {
  const char* on = std::getenv("CORVID_REAL_WEIGHTS");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "CORVID_REAL_WEIGHTS=1 runs it";
  const json ref = read_json(fixtures_dir() / "real" / (GetParam() + ".json"));
  const fs::path model = fixtures::source_dir() / "models" / ref["model"].get<std::string>();
  ASSERT_TRUE(fs::exists(model)) << "run scripts/fetch-model.sh --model " << GetParam();
  const ops::QuantizedMatmul before = ops::quantized_matmul();
  ops::set_quantized_matmul(ops::QuantizedMatmul::Exact);
  LoadedModel m = LoadedModel::load(model.string());
  for (const json& r : ref["runs"]) {
    const auto prompt = r["ids"].get<std::vector<int32_t>>();
    const auto want = r["greedy"].get<std::vector<int32_t>>();
    EXPECT_EQ(fixtures::greedy(*m.runner, prompt, static_cast<int64_t>(want.size())), want) << r["prompt"];
  }
  ops::set_quantized_matmul(before);
}

INSTANTIATE_TEST_SUITE_P(Models, RealWeights, ::testing::ValuesIn(real_references()),
                         [](const auto& p) { return fixtures::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RealWeights);

}  // namespace
}  // namespace corvid
