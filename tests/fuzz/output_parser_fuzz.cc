// libFuzzer target: the streaming output parsers on arbitrary model output. The first
// bytes pick the reasoning/tool formats and a piece size; the rest is the text. Any
// exception is a finding (malformed output must become content), and so is a
// difference between streaming the text in pieces and parsing it whole.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corvid/chat/output_parser.h"

using namespace corvid::chat;

namespace {

bool same(const ParsedOutput& a, const ParsedOutput& b) {
  if (a.content != b.content || a.reasoning_content != b.reasoning_content || a.tool_calls.size() != b.tool_calls.size())
    return false;
  for (std::size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.tool_calls[i].name || a.tool_calls[i].arguments != b.tool_calls[i].arguments ||
        a.tool_calls[i].id != b.tool_calls[i].id)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  static const ReasoningFormat kReasoning[] = {ReasoningFormat::kNone, ReasoningFormat::kThinkTags,
                                               ReasoningFormat::kGemma4, ReasoningFormat::kMistral,
                                               ReasoningFormat::kHarmony};
  static const ToolFormat kTools[] = {ToolFormat::kNone,    ToolFormat::kHermes, ToolFormat::kXmlFunction,
                                      ToolFormat::kMiniCpm, ToolFormat::kLlama3, ToolFormat::kMistral,
                                      ToolFormat::kGemma4,  ToolFormat::kHarmony, ToolFormat::kDeepSeek,
                                      ToolFormat::kKimi,    ToolFormat::kGlm};
  OutputParserOptions options;
  options.reasoning = kReasoning[data[0] % 5];
  options.starts_in_reasoning = (data[0] / 5) % 2 == 1;
  options.tools_format = kTools[data[1] % 11];
  options.tools = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties":
          {"i": {"type": "integer"}, "o": {"type": "object"}, "b": {"type": "boolean"}}}}}])");
  std::size_t piece = 1 + data[2] % 16;
  std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);

  ParsedOutput whole = parse_output(text, options, ToolCallIdGenerator(1));
  OutputParser parser(options, ToolCallIdGenerator(1));
  for (std::size_t at = 0; at < text.size(); at += piece) parser.feed(text.substr(at, piece));
  parser.finish();
  if (!same(whole, parser.result())) __builtin_trap();
  return 0;
}
