// Structured output: formats compiled against real vocabularies (the tiny llama
// fixture's byte-level BPE, SmolLM2's when fetched) hold random walks to what they
// describe; the engine applies masks per row (free rows keep their bits; constrained
// replies parse and validate), and forced tool calls come out of the parser.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "corvid/chat/output_parser.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/structured_output.h"
#include "fixture_util.h"

namespace corvid {
namespace {

LoadedModel tiny_llama() { return LoadedModel::load((fixtures::fixtures_dir() / "llama").string()); }

// An engine over a small pool (one request at a time in the tests that use it).
EngineConfig small_engine() {
  EngineConfig config;
  config.num_blocks = 128;
  config.block_size = 4;
  return config;
}

bool allowed(const std::vector<int32_t>& mask, int32_t t) { return (static_cast<uint32_t>(mask[t / 32]) >> (t % 32)) & 1u; }

// Walks a format with random choices among the allowed tokens (a random model) until it
// is complete and a stop token is allowed, then returns the text. Every token the mask
// allows must be accepted, and a token it forbids must be refused.
// Unbounded formats (free strings) would wander for ever: a closing bias picks a token
// that closes a string, array or object (or ends a number) half of the time it may.
std::string random_walk(const Tokenizer& tok, int64_t vocab, const OutputFormat& format, uint32_t seed,
                        int max_tokens = 400, bool closing_bias = false) {
  FormatCompiler compiler(tok, vocab);
  const int32_t stop = tok.eos_ids().empty() ? 0 : tok.eos_ids()[0];
  const std::vector<int32_t> stops = {stop};
  FormatMatcher m(compiler.compile(format), stops);
  std::mt19937 rng(seed);
  std::vector<int32_t> mask(static_cast<size_t>(FormatMatcher::mask_words(vocab)));
  std::vector<int32_t> out;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> ok;
    for (int32_t t = 0; t < vocab; ++t)
      if (allowed(mask, t)) ok.push_back(t);
    EXPECT_FALSE(ok.empty()) << "no token allowed after " << tok.decode(out, false);
    if (ok.empty()) break;
    // Once complete, stop when allowed (a real model's EOS); before, never pick it.
    if (m.complete() && allowed(mask, stop)) break;
    std::vector<int32_t> choices;
    for (int32_t t : ok)
      if (t != stop) choices.push_back(t);
    if (choices.empty()) break;
    // A forbidden token is refused and changes nothing.
    for (int32_t t = 0; t < vocab; ++t)
      if (!allowed(mask, t) && t != stop && !tok.is_special(t)) {
        EXPECT_FALSE(m.accept(t)) << "token " << t << " was masked but accepted";
        break;
      }
    int32_t pick = choices[rng() % choices.size()];
    if (closing_bias && rng() % 2) {
      for (int32_t t : choices) {
        const int32_t one[1] = {t};
        const std::string piece = tok.decode(one, false);
        if (piece == "\"" || piece == "}" || piece == "]") {
          pick = t;
          break;
        }
      }
    }
    EXPECT_TRUE(m.accept(pick));
    out.push_back(pick);
  }
  EXPECT_TRUE(m.complete()) << tok.decode(out, false);
  return tok.decode(out, false);
}

TEST(StructuredOutput, RandomWalksFollowAJsonSchema) {
  LoadedModel llm = tiny_llama();
  OutputFormat f;
  f.kind = OutputFormat::Kind::JsonSchema;
  f.spec = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
              "age": {"type": "integer", "minimum": 0, "maximum": 120},
              "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
              "required": ["name", "age", "tags"], "additionalProperties": false})";
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const std::string text = random_walk(*llm.tokenizer, llm.model->config().vocab_size, f, seed);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 3u) << text;
    ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << text;
    size_t chars = 0;  // maxLength counts characters (code points), not bytes
    for (unsigned char c : j["name"].get<std::string>()) chars += (c & 0xC0) != 0x80;
    EXPECT_LE(chars, 8u) << text;
    ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << text;
    EXPECT_GE(j["age"].get<int64_t>(), 0);
    EXPECT_LE(j["age"].get<int64_t>(), 120);
    ASSERT_TRUE(j.contains("tags") && j["tags"].is_array()) << text;
    for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b") << text;
  }
}

TEST(StructuredOutput, RegexChoiceAndAnyJson) {
  LoadedModel llm = tiny_llama();
  const int64_t vocab = llm.model->config().vocab_size;
  OutputFormat regex{OutputFormat::Kind::Regex, "[0-9]{3}-[a-z]{2,5}"};
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const std::string text = random_walk(*llm.tokenizer, vocab, regex, seed);
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{3}-[a-z]{2,5}"))) << text;
  }
  OutputFormat choice{OutputFormat::Kind::Grammar, R"(root ::= "yes" | "no" | "café \"au\" lait")"};
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const std::string text = random_walk(*llm.tokenizer, vocab, choice, seed);
    EXPECT_TRUE(text == "yes" || text == "no" || text == "café \"au\" lait") << text;
  }
  OutputFormat object{OutputFormat::Kind::Json, "", true};
  const nlohmann::json j =
      nlohmann::json::parse(random_walk(*llm.tokenizer, vocab, object, 3, 400, /*closing_bias=*/true), nullptr, false);
  EXPECT_TRUE(j.is_object());
}

TEST(StructuredOutput, BadFormatsAreErrorsNamingTheKind) {
  LoadedModel llm = tiny_llama();
  FormatCompiler compiler(*llm.tokenizer, llm.model->config().vocab_size);
  auto message = [&](const OutputFormat& f) {
    try {
      compiler.compile(f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  EXPECT_NE(message({OutputFormat::Kind::JsonSchema, "{not json"}).find("json_schema"), std::string::npos);
  EXPECT_NE(message({OutputFormat::Kind::Regex, "[a-"}).find("regex"), std::string::npos);
  EXPECT_NE(message({OutputFormat::Kind::Grammar, "root ::= undefined_rule"}).find("grammar"), std::string::npos);
}

// Special tokens never appear inside a format, and ids past the tokenizer's vocabulary
// (a model's padded embedding rows) are never allowed.
TEST(StructuredOutput, SpecialAndPaddingTokensAreMasked) {
  LoadedModel llm = tiny_llama();
  const Tokenizer& tok = *llm.tokenizer;
  const int64_t vocab = llm.model->config().vocab_size + 40;  // as if the model had padded rows
  FormatCompiler compiler(tok, vocab);
  const std::vector<int32_t> stops = {2};
  FormatMatcher m(compiler.compile({OutputFormat::Kind::Json}), stops);
  std::vector<int32_t> mask(static_cast<size_t>(FormatMatcher::mask_words(vocab)));
  EXPECT_TRUE(m.fill_mask(mask));
  for (int32_t t = 0; t < tok.vocab_size(); ++t)
    if (tok.is_special(t)) {
      EXPECT_FALSE(allowed(mask, t)) << "special token " << t;
    }
  for (int64_t t = tok.vocab_size(); t < vocab; ++t) EXPECT_FALSE(allowed(mask, static_cast<int32_t>(t)));
}

// Real vocabularies: SmolLM2's (GPT-2 byte level, 49k tokens) when fetched.
TEST(StructuredOutput, SmolLM2Vocabulary) {
  const auto path = fixtures::source_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched";
  std::unique_ptr<Tokenizer> tok = load_tokenizer(path.string());
  OutputFormat f{OutputFormat::Kind::JsonSchema, R"({"type": "object", "properties": {"city": {"type": "string"}},
                                                    "required": ["city"]})"};
  const nlohmann::json j = nlohmann::json::parse(random_walk(*tok, 49152, f, 7, 300, true), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["city"].is_string());
}

// In the engine: constrained rows parse; free rows in the same batches keep the exact
// tokens they get alone (a mask touches only its own row).
TEST(StructuredOutput, EngineHoldsRowsToTheirFormat) {
  LoadedModel llm = tiny_llama();
  const int64_t vocab = llm.model->config().vocab_size;
  FormatCompiler compiler(*llm.tokenizer, vocab);
  const std::shared_ptr<const CompiledFormat> schema = compiler.compile(
      {OutputFormat::Kind::JsonSchema, R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
                                          "maximum": 999}}, "required": ["n"], "additionalProperties": false})"});
  EngineConfig config;
  config.num_blocks = 256;
  config.block_size = 4;
  config.scheduler = {8, 64};
  auto request = [&](int i, bool constrained) {
    GenerationRequest r;
    r.prompt = llm.tokenizer->encode("Question " + std::to_string(i) + ": what is the number?", true);
    r.max_tokens = 40;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    if (constrained) r.format = schema;
    return r;
  };
  std::vector<RequestResult> alone;
  {
    Engine engine(*llm.runner, llm.tokenizer.get(), config);
    for (int i = 0; i < 8; i += 2) alone.push_back(engine.submit(request(i, false)).wait());
  }
  Engine engine(*llm.runner, llm.tokenizer.get(), config);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(engine.submit(request(i, i % 2 == 1)));
  for (int i = 0; i < 8; ++i) {
    const RequestResult r = handles[static_cast<size_t>(i)].wait();
    if (i % 2 == 0) {
      EXPECT_EQ(r.token_ids, alone[static_cast<size_t>(i / 2)].token_ids) << "free row " << i;
      continue;
    }
    ASSERT_EQ(r.finish, FinishReason::Stop) << r.text;  // the EOS the format allows once complete
    const nlohmann::json j = nlohmann::json::parse(r.text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.text;
    EXPECT_EQ(j.size(), 1u) << r.text;
    EXPECT_TRUE(j["n"].is_number_integer()) << r.text;
  }
}

// With ignore_eos no stop token may end the text: a complete format ends it.
TEST(StructuredOutput, IgnoreEosEndsWhenTheFormatIsComplete) {
  LoadedModel llm = tiny_llama();
  FormatCompiler compiler(*llm.tokenizer, llm.model->config().vocab_size);
  Engine engine(*llm.runner, llm.tokenizer.get(), small_engine());
  GenerationRequest r;
  r.prompt = llm.tokenizer->encode("Pick one", true);
  r.max_tokens = 30;
  r.ignore_eos = true;
  r.format = compiler.compile({OutputFormat::Kind::Grammar, R"(root ::= "alpha" | "beta")"});
  const RequestResult out = engine.submit(r).wait();
  EXPECT_TRUE(out.text == "alpha" || out.text == "beta") << out.text;
  EXPECT_EQ(out.finish, FinishReason::Stop);
}

// The format starts after format_after (a reasoning close marker): what comes before is free.
TEST(StructuredOutput, FormatStartsAfterTheMarker) {
  LoadedModel llm = tiny_llama();
  FormatCompiler compiler(*llm.tokenizer, llm.model->config().vocab_size);
  Engine engine(*llm.runner, llm.tokenizer.get(), small_engine());
  GenerationRequest r;
  r.prompt = llm.tokenizer->encode("Once upon a time", true);
  r.max_tokens = 30;
  r.format = compiler.compile({OutputFormat::Kind::Regex, "[0-9]+"});
  r.format_after = {r.prompt.back()};  // some token the free text will not produce soon
  const RequestResult free_text = engine.submit(r).wait();
  EXPECT_FALSE(std::regex_match(free_text.text, std::regex("[0-9]+"))) << free_text.text;
  r.format_after.clear();
  const RequestResult held = engine.submit(r).wait();
  EXPECT_TRUE(std::regex_match(held.text, std::regex("[0-9]+"))) << held.text;
}

TEST(StructuredOutput, ForcedToolCallsComeOutOfTheParser) {
  chat::OutputParserOptions options;
  options.tools_format = chat::ToolFormat::kForcedList;
  chat::ParsedOutput out = chat::parse_output(R"([{"name": "get_weather", "parameters": {"city": "Paris"}},
                                                  {"name": "get_time", "parameters": {}}])",
                                              options, chat::ToolCallIdGenerator(1));
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(out.tool_calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  EXPECT_TRUE(out.content.empty());
  options.tools_format = chat::ToolFormat::kForcedNamed;
  options.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  out = chat::parse_output(R"({"city": "Oslo"})", options, chat::ToolCallIdGenerator(1));
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(out.tool_calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
  // Cut short (max_tokens): not a call, the text stays content.
  out = chat::parse_output(R"({"city": "Os)", options, chat::ToolCallIdGenerator(1));
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.content, R"({"city": "Os)");
}

}  // namespace
}  // namespace corvid
