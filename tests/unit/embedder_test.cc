// Embeddings: the BERT encoder against transformers and sentence-transformers (a tiny
// random-weight fixture; all-MiniLM-L6-v2's real weights when fetched), a decoder's
// last-token embeddings against transformers, pooling modes, batch invariance, and
// the embedder's refusals. Oracles: tests/oracle/make_embedding_oracle.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "corvid/engine/embedder.h"
#include "corvid/engine/request.h"
#include "embedding_test_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using fixtures::read_json;

fs::path embeddings_dir() { return fixtures::fixtures_dir() / "embeddings"; }

using testing::cosine;

// Tokenizes the oracle's sentences (checking the ids against its own), embeds them in
// one call and compares each vector: cosine >= min_cosine and every value within atol.
void expect_oracle(const fs::path& model_dir, const fs::path& oracle_file, bool encoder, double min_cosine,
                   double atol) {
  LoadedModel m = LoadedModel::load(model_dir.string());
  Embedder embedder(m, read_pooling(model_dir.string(), encoder));
  const nlohmann::json oracle = read_json(oracle_file);
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < oracle["sentences"].size(); ++i) {
    inputs.push_back(m.tokenizer->encode(oracle["sentences"][i].get<std::string>(), true));
    EXPECT_EQ(inputs.back(), oracle["token_ids"][i].get<std::vector<int32_t>>()) << "sentence " << i;
  }
  const std::vector<std::vector<float>> got = embedder.embed(inputs);
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double> want = oracle["embeddings"][i].get<std::vector<double>>();
    ASSERT_EQ(got[i].size(), want.size());
    EXPECT_GE(cosine(got[i], want), min_cosine) << "sentence " << i;
    double worst = 0;
    for (size_t d = 0; d < want.size(); ++d) worst = std::max(worst, std::abs(got[i][d] - want[d]));
    EXPECT_LE(worst, atol) << "sentence " << i;
  }
}

TEST(BertTiny, HiddenStatesEqualTransformers) {
  const fs::path dir = embeddings_dir() / "bert_tiny";
  LoadedModel m = LoadedModel::load(dir.string());
  EXPECT_TRUE(m.model->state_spec().empty());
  const nlohmann::json oracle = read_json(dir / "oracle.json");
  const std::vector<int32_t> ids = oracle["token_ids"][0].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(ids.size()), dim = m.model->config().hidden_size;
  std::vector<float> hidden(static_cast<size_t>(n * dim));
  const std::vector<std::span<const int32_t>> seqs = {ids};
  m.runner->encode(seqs, Tensor(DType::F32, {n, dim}, hidden.data()));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < dim; ++d)
      EXPECT_NEAR(hidden[static_cast<size_t>(r * dim + d)], oracle["hidden_first"][r][d].get<double>(), 1e-4)
          << "row " << r << " dim " << d;
}

TEST(BertTiny, EmbeddingsEqualSentenceTransformers) {
  expect_oracle(embeddings_dir() / "bert_tiny", embeddings_dir() / "bert_tiny" / "oracle.json", true, 0.99999, 1e-5);
}

TEST(BertTiny, LogitsAreRefused) {
  LoadedModel m = LoadedModel::load((embeddings_dir() / "bert_tiny").string());
  const std::vector<int32_t> tokens = {2, 3}, positions = {0, 1};
  const std::vector<int64_t> rows = {1}, starts = {0, 2};
  Step step{tokens, positions, {}, rows, nullptr, StepOutput::Logits, starts};
  std::vector<float> logits(static_cast<size_t>(m.model->config().vocab_size));
  EXPECT_THROW(m.model->forward(step, Tensor(DType::F32, {1, m.model->config().vocab_size}, logits.data())), Error);
  // A decoder's path (a KV cache for generation) is refused before the model runs.
  try {
    KVCache kv(m.model->state_spec(), 16);
    ADD_FAILURE() << "a KV cache for an encoder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corvid serve --task embed"), std::string::npos) << e.what();
  }
}

// An input's vector is the same bits alone or batched with others (CPU: the matmuls
// reduce in a fixed order, attention runs per input), and the same when the step limit
// splits a request over several steps.
TEST(BertTiny, BatchInvariant) {
  const fs::path dir = embeddings_dir() / "bert_tiny";
  LoadedModel m = LoadedModel::load(dir.string());
  const nlohmann::json oracle = read_json(dir / "oracle.json");
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& ids : oracle["token_ids"]) inputs.push_back(ids.get<std::vector<int32_t>>());
  Embedder together(m, read_pooling(dir.string(), true));
  const std::vector<std::vector<float>> all = together.embed(inputs);
  EXPECT_EQ(together.steps(), 1);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(together.embed({inputs[i]})[0], all[i]) << "input " << i;
  together.shutdown();
  EmbedderConfig small;
  small.max_batch_tokens = 100;  // several steps of a few inputs each
  Embedder split(m, read_pooling(dir.string(), true), small);
  EXPECT_EQ(split.embed(inputs), all);
  EXPECT_GT(split.steps(), 2);
}

TEST(BertTiny, RefusesWhatDoesNotFit) {
  const fs::path dir = embeddings_dir() / "bert_tiny";
  LoadedModel m = LoadedModel::load(dir.string());
  Embedder embedder(m, read_pooling(dir.string(), true));
  EXPECT_EQ(embedder.max_input_tokens(), 128);  // sentence_bert_config.json (= max_position_embeddings)
  auto reason = [&](std::vector<std::vector<int32_t>> inputs) {
    try {
      embedder.embed(std::move(inputs));
    } catch (const RequestRejected& e) {
      return static_cast<int>(e.reason());
    }
    return -1;
  };
  EXPECT_EQ(reason({}), static_cast<int>(RequestRejected::Reason::Invalid));
  EXPECT_EQ(reason({{2, 3}, {}}), static_cast<int>(RequestRejected::Reason::Invalid));
  EXPECT_EQ(reason({std::vector<int32_t>(129, 5)}), static_cast<int>(RequestRejected::Reason::TooLong));
  EXPECT_EQ(reason({{2, 400}}), static_cast<int>(RequestRejected::Reason::Invalid));
  EXPECT_EQ(reason({{2, -1}}), static_cast<int>(RequestRejected::Reason::Invalid));
  EXPECT_EQ(embedder.embed({std::vector<int32_t>(128, 5)}).size(), 1u);
}

TEST(DecoderEmbeddings, LastTokenEqualsTransformers) {
  expect_oracle(fixtures::fixtures_dir() / "llama", embeddings_dir() / "llama_last_token.json", false, 0.99999, 1e-4);
}

TEST(DecoderEmbeddings, BatchInvariant) {
  const fs::path dir = fixtures::fixtures_dir() / "llama";
  LoadedModel m = LoadedModel::load(dir.string());
  Embedder embedder(m, read_pooling(dir.string(), false));
  const nlohmann::json oracle = read_json(embeddings_dir() / "llama_last_token.json");
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& ids : oracle["token_ids"]) inputs.push_back(ids.get<std::vector<int32_t>>());
  const std::vector<std::vector<float>> all = embedder.embed(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(embedder.embed({inputs[i]})[0], all[i]) << "input " << i;
}

TEST(Pooling, Modes) {
  const std::vector<float> h = {1, 2, 3, -1, 4, 0, 5, 0, 2};  // three rows of three
  PoolingConfig c;
  c.normalize = false;
  c.mode = PoolingMode::Mean;
  EXPECT_EQ(pool_hidden(h.data(), 3, 3, c), (std::vector<float>{5.0f / 3, 2, 5.0f / 3}));
  c.mode = PoolingMode::Cls;
  EXPECT_EQ(pool_hidden(h.data(), 3, 3, c), (std::vector<float>{1, 2, 3}));
  c.mode = PoolingMode::LastToken;
  EXPECT_EQ(pool_hidden(h.data(), 3, 3, c), (std::vector<float>{5, 0, 2}));
  c.mode = PoolingMode::Max;
  EXPECT_EQ(pool_hidden(h.data(), 3, 3, c), (std::vector<float>{5, 4, 3}));
  c.mode = PoolingMode::MeanSqrtLen;
  const std::vector<float> s = pool_hidden(h.data(), 3, 3, c);
  EXPECT_FLOAT_EQ(s[1], static_cast<float>(6 / std::sqrt(3.0)));
  c.mode = PoolingMode::Cls;
  c.normalize = true;
  const std::vector<float> unit = pool_hidden(h.data(), 3, 3, c);
  EXPECT_FLOAT_EQ(unit[0] * unit[0] + unit[1] * unit[1] + unit[2] * unit[2], 1.0f);
  EXPECT_FLOAT_EQ(unit[2] / unit[0], 3.0f);
  const std::vector<float> cut = truncate_embedding(unit, 2);
  EXPECT_FLOAT_EQ(cut[0], static_cast<float>(1 / std::sqrt(5.0)));
  EXPECT_FLOAT_EQ(cut[1], static_cast<float>(2 / std::sqrt(5.0)));
  EXPECT_THROW(truncate_embedding(unit, 4), Error);
  EXPECT_THROW(truncate_embedding(unit, 0), Error);
}

TEST(Pooling, ReadsTheModelsFiles) {
  const PoolingConfig bert = read_pooling((embeddings_dir() / "bert_tiny").string(), true);
  EXPECT_EQ(bert.mode, PoolingMode::Mean);
  EXPECT_TRUE(bert.normalize);
  EXPECT_EQ(bert.max_tokens, 128);
  EXPECT_TRUE(bert.matryoshka);
  EXPECT_EQ(bert.dimensions, (std::vector<int64_t>{8, 16, 32}));
  const PoolingConfig llama = read_pooling((fixtures::fixtures_dir() / "llama").string(), false);
  EXPECT_EQ(llama.mode, PoolingMode::LastToken);
  EXPECT_TRUE(llama.normalize);
  EXPECT_FALSE(llama.matryoshka);
  // A module corvid does not run (a Dense projection) is refused, not skipped.
  const fs::path dir = fs::temp_directory_path() / "corvid_pooling_dense";
  fs::create_directories(dir);
  std::ofstream(dir / "modules.json")
      << R"([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])";
  EXPECT_THROW(read_pooling(dir.string(), true), Error);
  std::ofstream(dir / "modules.json") << R"([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])";
  fs::create_directories(dir / "1_Pooling");
  std::ofstream(dir / "1_Pooling" / "config.json") << R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})";
  EXPECT_THROW(read_pooling(dir.string(), true), Error);  // two modes: a concatenation
  std::ofstream(dir / "1_Pooling" / "config.json") << R"({"pooling_mode_cls_token": true})";
  EXPECT_EQ(read_pooling(dir.string(), true).mode, PoolingMode::Cls);
  EXPECT_FALSE(read_pooling(dir.string(), true).normalize);
  EXPECT_THROW(read_pooling(dir.string(), false), Error);  // a decoder: last-token only
  fs::remove_all(dir);
}

// all-MiniLM-L6-v2's real weights (scripts/fetch-model.sh --model minilm; ./test.sh
// fetches them): sentence-transformers' embeddings to cosine >= 0.9999.
TEST(MiniLM, EmbeddingsEqualSentenceTransformers) {
  const fs::path dir = fixtures::source_dir() / "models" / "all-MiniLM-L6-v2";
  if (!fs::exists(dir / "model.safetensors")) GTEST_SKIP() << "fetch it: scripts/fetch-model.sh --model minilm";
  expect_oracle(dir, embeddings_dir() / "minilm.json", true, 0.9999, 1e-4);
}

}  // namespace
}  // namespace corvid
