// OutputParser: reasoning and tool calls together, as the CLI and server use them, and
// format detection from the real chat templates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "corvid/chat/output_parser.h"
#include "output_parser_test_util.h"

namespace corvid::chat {
namespace {

using testing::Expected;
using testing::expect_every_split;

const nlohmann::json kTools = nlohmann::json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
   "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}}}}}
])");
const char* kWeatherArgs = R"({"location":"Zürich","days":3})";

OutputParserOptions options(ReasoningFormat reasoning, ToolFormat tools, bool starts_in_reasoning = false) {
  return {reasoning, starts_in_reasoning, tools, kTools};
}

TEST(OutputParser, Qwen3ReasoningThenHermesCall) {
  expect_every_split(options(ReasoningFormat::kThinkTags, ToolFormat::kHermes),
                     "<think>\nThe user wants the weather; call the tool.\n</think>\n\n<tool_call>\n{\"name\": "
                     "\"get_weather\", \"arguments\": {\"location\": \"Zürich\", \"days\": 3}}\n</tool_call>",
                     Expected{"", "The user wants the weather; call the tool.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, Qwen35StartsInReasoningThenContentAndXmlCall) {
  expect_every_split(options(ReasoningFormat::kThinkTags, ToolFormat::kXmlFunction, true),
                     "Need weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n"
                     "<parameter=location>\nZürich\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                     "</tool_call>",
                     Expected{"Let me check.", "Need weather.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, CallsInsideReasoningAreNotCalls) {
  expect_every_split(options(ReasoningFormat::kThinkTags, ToolFormat::kHermes),
                     "<think>Maybe <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>? "
                     "No.</think>It is sunny.",
                     Expected{"It is sunny.",
                              "Maybe <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>? No.",
                              {}});
}

TEST(OutputParser, GptOssAnalysisThenFunctionCallAsTemplateRendersIt) {
  expect_every_split(options(ReasoningFormat::kHarmony, ToolFormat::kHarmony),
                     "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant "
                     "to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": \"Zürich\", \"days\": "
                     "3}<|call|>",
                     Expected{"", "Need the weather tool.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, GptOssChannelFirstHeaderAndConstrain) {
  expect_every_split(options(ReasoningFormat::kHarmony, ToolFormat::kHarmony),
                     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": "
                     "\"Zürich\", \"days\": 3}<|call|>",
                     Expected{"", "", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, GptOssMalformedCallIsContent) {
  expect_every_split(options(ReasoningFormat::kHarmony, ToolFormat::kHarmony),
                     " to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": <|call|>",
                     Expected{"<|channel|>commentary to=functions.get_weather<|message|>{\"location\": <|call|>", "", {}});
}

TEST(OutputParser, Gemma4ThoughtThenCalls) {
  expect_every_split(options(ReasoningFormat::kGemma4, ToolFormat::kGemma4),
                     "<|channel>thought\nI should look it up.<channel|><|tool_call>call:get_weather{days:3,location:<|\"|>"
                     "Zürich<|\"|>}<tool_call|><|tool_response>",
                     Expected{"", "I should look it up.", {{"get_weather", R"({"days":3,"location":"Zürich"})"}}});
}

TEST(OutputParser, MinistralThinkThenCall) {
  expect_every_split(options(ReasoningFormat::kMistral, ToolFormat::kMistral),
                     "[THINK]Weather needed.[/THINK]Checking.[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Zürich\", "
                     "\"days\": 3}",
                     Expected{"Checking.", "Weather needed.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, MiniCpmThinkThenCall) {
  expect_every_split(options(ReasoningFormat::kThinkTags, ToolFormat::kMiniCpm, true),
                     "Use the tool.\n</think>\n\n<function name=\"get_weather\"><param name=\"location\">Zürich</param>"
                     "<param name=\"days\">3</param></function>",
                     Expected{"", "Use the tool.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, DeepSeekV31StartsInReasoningThenCall) {
  // The V3.1 generation prompt ends with "<think>" when thinking is on.
  expect_every_split(options(ReasoningFormat::kThinkTags, ToolFormat::kDeepSeek, true),
                     "Need the tool.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                     "{\"location\": \"Zürich\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                     Expected{"", "Need the tool.", {{"get_weather", kWeatherArgs}}});
}

TEST(OutputParser, PlainChatWithoutFormats) {
  expect_every_split(OutputParserOptions{}, "Hello there. <think> [TOOL_CALLS]", Expected{"Hello there. <think> [TOOL_CALLS]", "", {}});
}

TEST(OutputParser, ResultEqualsNonStreamingParse) {
  OutputParserOptions opts = options(ReasoningFormat::kThinkTags, ToolFormat::kHermes);
  const char* text = "<think>x</think>y<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  ParsedOutput whole = parse_output(text, opts, ToolCallIdGenerator(5));
  EXPECT_EQ(whole.content, "y");
  EXPECT_EQ(whole.reasoning_content, "x");
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].id, ToolCallIdGenerator(5).next());
  EXPECT_EQ(whole.tool_calls[0].arguments, "{}");
}

// ---- random marker soup: whatever the text, every split gives the whole-text result ---

TEST(OutputParser, RandomMarkerSoupKeepsStreamingInvariant) {
  const std::vector<std::string> fragments = {
      "<tool_call>", "</tool_call>", "<tool_", "</tool", "<function=", "</function>", "<parameter=", "</parameter>",
      "get_weather>", "location>", "<function name=\"f\">", "<param name=\"location\">", "</param>", "<![CDATA[",
      "]]>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[TOOL", "get_weather", "<|python_tag|>", "<|tool_call>",
      "call:", "<tool_call|>", "<|\"|>", "<|tool_response>", "<think>", "</think>", "<thi", "[THINK]", "[/THINK]",
      "<|channel>thought", "<channel|>", "<|channel|>", "analysis", "final", "commentary", " to=functions.f",
      "<|message|>", "<|end|>", "<|start|>assistant", "<|call|>", "<|return|>", "<|constrain|>json",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool",
      "<|tool_call_begin|>", "functions.f:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<arg_key>",
      "</arg_key>", "<arg_value>", "</arg_value>",
      "{", "}", "[", "]", "\"", "\\", ":", ",", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
      "{\"name\": \"f\", \"parameters\": {}}", "{\"location\": \"Zürich\"}", "location:<|\"|>x<|\"|>", "3", "true",
      " ", "\n", "\n\n", "text", "é東🌍", "<", "|", ">"};
  const std::vector<std::pair<ReasoningFormat, ToolFormat>> combos = {
      {ReasoningFormat::kThinkTags, ToolFormat::kHermes},   {ReasoningFormat::kThinkTags, ToolFormat::kXmlFunction},
      {ReasoningFormat::kThinkTags, ToolFormat::kMiniCpm},  {ReasoningFormat::kNone, ToolFormat::kLlama3},
      {ReasoningFormat::kMistral, ToolFormat::kMistral},    {ReasoningFormat::kGemma4, ToolFormat::kGemma4},
      {ReasoningFormat::kHarmony, ToolFormat::kHarmony},    {ReasoningFormat::kThinkTags, ToolFormat::kNone},
      {ReasoningFormat::kThinkTags, ToolFormat::kDeepSeek}, {ReasoningFormat::kNone, ToolFormat::kKimi},
      {ReasoningFormat::kThinkTags, ToolFormat::kGlm},
  };
  std::mt19937 rng(1234);
  for (const auto& [reasoning, tools] : combos) {
    for (bool starts_in_reasoning : {false, true}) {
      OutputParserOptions opts = options(reasoning, tools, starts_in_reasoning);
      for (int sample = 0; sample < 150; ++sample) {
        std::string text;
        int count = 1 + static_cast<int>(rng() % 14);
        for (int i = 0; i < count; ++i) text += fragments[rng() % fragments.size()];
        ParsedOutput whole;
        try {
          whole = parse_output(text, opts, ToolCallIdGenerator(testing::kIdSeed));
        } catch (const std::exception& e) {
          FAIL() << "threw " << e.what() << " on " << text;
        }
        std::vector<std::size_t> every;
        for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
        std::string problem = testing::check_split(opts, text, every, whole);
        for (std::size_t cut = 0; problem.empty() && cut <= text.size(); ++cut)
          problem = testing::check_split(opts, text, {cut}, whole);
        ASSERT_TRUE(problem.empty()) << reasoning_format_name(reasoning) << "/" << tool_format_name(tools)
                                     << " on [" << text << "]: " << problem;
      }
    }
  }
}

// ---- detection from the real templates ------------------------------------------------

std::filesystem::path templates_dir() {
  if (const char* dir = std::getenv("CORVID_CHAT_TEMPLATES_DIR")) return dir;
  for (const char* up : {"../shared/chat-templates", "../../shared/chat-templates"}) {
    std::filesystem::path p = std::filesystem::path(CORVID_SOURCE_DIR) / up;
    if (std::filesystem::exists(p)) return p;
  }
  return {};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputParser, DetectsFormatsOfRealTemplates) {
  std::filesystem::path dir = templates_dir();
  if (dir.empty()) GTEST_SKIP() << "no chat-templates folder (set CORVID_CHAT_TEMPLATES_DIR)";
  const std::map<std::string, std::pair<ToolFormat, ReasoningFormat>> expected = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", {ToolFormat::kHermes, ReasoningFormat::kNone}},
      {"Qwen-Qwen3-0.6B.jinja", {ToolFormat::kHermes, ReasoningFormat::kThinkTags}},
      {"Qwen-QwQ-32B.jinja", {ToolFormat::kHermes, ReasoningFormat::kThinkTags}},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", {ToolFormat::kHermes, ReasoningFormat::kNone}},
      {"Qwen3-Coder.jinja", {ToolFormat::kXmlFunction, ReasoningFormat::kNone}},
      {"Qwen3.5-4B.jinja", {ToolFormat::kXmlFunction, ReasoningFormat::kThinkTags}},
      {"openbmb-MiniCPM5-1B.jinja", {ToolFormat::kMiniCpm, ReasoningFormat::kThinkTags}},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", {ToolFormat::kLlama3, ReasoningFormat::kNone}},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", {ToolFormat::kLlama3, ReasoningFormat::kNone}},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", {ToolFormat::kLlama3, ReasoningFormat::kNone}},
      {"meetkai-functionary-medium-v3.2.jinja", {ToolFormat::kNone, ReasoningFormat::kNone}},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", {ToolFormat::kMistral, ReasoningFormat::kNone}},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", {ToolFormat::kMistral, ReasoningFormat::kNone}},
      {"unsloth-mistral-Devstral-Small-2507.jinja", {ToolFormat::kMistral, ReasoningFormat::kNone}},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", {ToolFormat::kMistral, ReasoningFormat::kMistral}},
      {"google-gemma-4-31B-it.jinja", {ToolFormat::kGemma4, ReasoningFormat::kGemma4}},
      {"google-gemma-2-2b-it.jinja", {ToolFormat::kNone, ReasoningFormat::kNone}},
      {"openai-gpt-oss-120b.jinja", {ToolFormat::kHarmony, ReasoningFormat::kHarmony}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", {ToolFormat::kDeepSeek, ReasoningFormat::kThinkTags}},
      {"HuggingFaceTB-SmolLM3-3B.jinja", {ToolFormat::kNone, ReasoningFormat::kThinkTags}},
      {"microsoft-Phi-3.5-mini-instruct.jinja", {ToolFormat::kNone, ReasoningFormat::kNone}},
      {"ibm-granite-granite-4.0.jinja", {ToolFormat::kHermes, ReasoningFormat::kNone}},
      {"GLM-4.6.jinja", {ToolFormat::kGlm, ReasoningFormat::kThinkTags}},
      {"deepseek-ai-DeepSeek-V3.1.jinja", {ToolFormat::kDeepSeek, ReasoningFormat::kThinkTags}},
      {"moonshotai-Kimi-K2.jinja", {ToolFormat::kKimi, ReasoningFormat::kNone}},
  };
  for (const auto& [name, formats] : expected) {
    SCOPED_TRACE(name);
    std::string source = read_text(dir / name);
    ASSERT_FALSE(source.empty());
    EXPECT_EQ(tool_format_name(detect_tool_format(source)), tool_format_name(formats.first));
    EXPECT_EQ(reasoning_format_name(detect_reasoning_format(source)), reasoning_format_name(formats.second));
  }
}

TEST(OutputParser, DetectOptionsFromTemplateAndPrompt) {
  std::string qwen35 = "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}<parameter=x> {{- '<think>\\n' }}";
  OutputParserOptions opts = detect_output_options(qwen35, "<|im_start|>assistant\n<think>\n", kTools);
  EXPECT_EQ(opts.tools_format, ToolFormat::kXmlFunction);
  EXPECT_EQ(opts.reasoning, ReasoningFormat::kThinkTags);
  EXPECT_TRUE(opts.starts_in_reasoning);
  // Without tools in the request, calls are not parsed.
  opts = detect_output_options(qwen35, "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(opts.tools_format, ToolFormat::kNone);
  EXPECT_FALSE(opts.starts_in_reasoning);
}

}  // namespace
}  // namespace corvid::chat
