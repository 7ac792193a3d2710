// What the CLI and server use to turn generated text into an assistant message:
// reasoning split off first, then tool calls out of the rest (reasoning may discuss
// tool calls without making them, so calls are only read from the answer).
//
// Many markers are special tokens ([TOOL_CALLS], [THINK], <|tool_call>, <|channel|>,
// <|python_tag|>, DeepSeek's and Kimi's), so the text fed here must be decoded with
// special tokens kept (StreamingDetokenizer with skip_special_tokens=false), stopping
// before the end-of-turn token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/chat/reasoning_parser.h"
#include "corvid/chat/tool_call_parser.h"

namespace corvid::chat {

struct OutputParserOptions {
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;  // the prompt opened reasoning (prompt_opens_reasoning)
  ToolFormat tools_format = ToolFormat::kNone;
  nlohmann::json tools = nlohmann::json::array();  // the request's tools (types XML arguments)
};

// Formats from the chat template text, and whether `rendered_prompt` opened reasoning.
// Tool calls are only parsed when the request has tools.
OutputParserOptions detect_output_options(std::string_view template_source, std::string_view rendered_prompt,
                                          nlohmann::json tools = nlohmann::json::array());

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options, ToolCallIdGenerator ids = ToolCallIdGenerator());

  // Feed decoded text pieces as the detokenizer emits them; returns the events the
  // piece decides (content, reasoning and tool-call deltas). Malformed model output
  // never throws: it ends up as content.
  std::vector<OutputEvent> feed(std::string_view piece);
  std::vector<OutputEvent> finish();

  // The complete message; equal to the concatenation of all events.
  ParsedOutput result() const;

 private:
  void route(std::vector<OutputEvent>& reasoning_events, std::vector<OutputEvent>& out);

  ReasoningParser reasoning_;
  ToolCallParser tools_;
};

// Non-streaming: the whole output at once.
ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options,
                          ToolCallIdGenerator ids = ToolCallIdGenerator());

}  // namespace corvid::chat
