// Stop tokens come from the checkpoint's metadata (engine/stop_tokens.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "corvid/chat/chat_template.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/stop_tokens.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

std::vector<int32_t> stops_of(const LoadedModel& m, const ChatTemplate* tmpl) {
  return stop_token_ids(m.tokenizer.get(), m.model->config(), &m.files->generation, tmpl);
}

TEST(StopTokens, TinyFixturesStopAtImEndAndEndOfText) {
  // eos_token <|im_end|> (2) from the metadata; <|endoftext|> (0) as the vocabulary's end of text.
  for (const std::string& name : fixtures::tiny_fixtures()) {
    SCOPED_TRACE(name);
    const std::string dir = (fixtures::fixtures_dir() / name).string();
    LoadedModel m = LoadedModel::load(dir);
    EXPECT_EQ(stops_of(m, nullptr), (std::vector<int32_t>{0, 2}));
    const ChatTemplate tmpl = ChatTemplate::from_model(dir);
    EXPECT_EQ(end_of_turn_id(tmpl, *m.tokenizer), 2);
    EXPECT_EQ(stops_of(m, &tmpl), (std::vector<int32_t>{0, 2}));
  }
}

TEST(StopTokens, SmolLM2GgufStopsAtImEndAndEndOfText) {
  const fs::path gguf = fixtures::source_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "SmolLM2 not fetched";
  LoadedModel m = LoadedModel::load(gguf.string());
  ASSERT_EQ(m.tokenizer->token_to_id("<|endoftext|>"), 0);
  ASSERT_EQ(m.tokenizer->token_to_id("<|im_end|>"), 2);
  EXPECT_EQ(stops_of(m, nullptr), (std::vector<int32_t>{0, 2}));
  const ChatTemplate tmpl = ChatTemplate::from_model(gguf.string());
  EXPECT_EQ(stops_of(m, &tmpl), (std::vector<int32_t>{0, 2}));
}

TEST(StopTokens, MetadataIdsAreUnitedAndOutOfVocabularyIdsDropped) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string());
  ModelConfig config = m.model->config();
  config.eos_token_ids = {2, config.vocab_size, -1};
  GenerationConfig generation;
  generation.eos_token_ids = {5, 2};
  EXPECT_EQ(stop_token_ids(m.tokenizer.get(), config, &generation), (std::vector<int32_t>{0, 2, 5}));
  // Without a tokenizer (the Engine on bare ids) only config.json's ids are known.
  config.eos_token_ids = {7};
  EXPECT_EQ(stop_token_ids(nullptr, config), (std::vector<int32_t>{7}));
}

TEST(StopTokens, EndOfTurnIsTheSpecialTokenTheTemplateWritesAfterAReply) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string());
  const Tokenizer& tok = *m.tokenizer;
  // A family that ends turns with <|im_start|> (1): learned from the template alone.
  const ChatTemplate marker("{% for m in messages %}{{ m.content }}<|im_start|>\n{% endfor %}", jinja::Json::object());
  EXPECT_EQ(end_of_turn_id(marker, tok), 1);
  EXPECT_EQ(stops_of(m, &marker), (std::vector<int32_t>{0, 1, 2}));
  // Plain text after the reply, or a template that refuses the probe: nothing to learn.
  const ChatTemplate plain("{% for m in messages %}{{ m.content }}.\n<|im_start|>{% endfor %}", jinja::Json::object());
  EXPECT_EQ(end_of_turn_id(plain, tok), std::nullopt);
  const ChatTemplate refuses("{{ raise_exception('a system message is required') }}", jinja::Json::object());
  EXPECT_EQ(end_of_turn_id(refuses, tok), std::nullopt);
  EXPECT_EQ(stops_of(m, &refuses), (std::vector<int32_t>{0, 2}));
}

}  // namespace
}  // namespace corvid
