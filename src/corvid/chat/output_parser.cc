#include "corvid/chat/output_parser.h"

#include <utility>

namespace corvid::chat {

OutputParserOptions detect_output_options(std::string_view template_source, std::string_view rendered_prompt,
                                          nlohmann::json tools) {
  OutputParserOptions options;
  options.reasoning = detect_reasoning_format(template_source);
  options.starts_in_reasoning = prompt_opens_reasoning(rendered_prompt, options.reasoning);
  bool has_tools = tools.is_array() && !tools.empty();
  options.tools_format = has_tools ? detect_tool_format(template_source) : ToolFormat::kNone;
  options.tools = std::move(tools);
  return options;
}

OutputParser::OutputParser(OutputParserOptions options, ToolCallIdGenerator ids)
    : reasoning_(options.reasoning, options.starts_in_reasoning),
      tools_(options.tools_format, std::move(options.tools), std::move(ids)) {}

// Reasoning passes through; content goes on to the tool-call parser.
void OutputParser::route(std::vector<OutputEvent>& reasoning_events, std::vector<OutputEvent>& out) {
  for (OutputEvent& event : reasoning_events) {
    if (event.kind == OutputEvent::Kind::kContent) {
      tools_.feed(event.text, out);
    } else {
      out.push_back(std::move(event));
    }
  }
}

std::vector<OutputEvent> OutputParser::feed(std::string_view piece) {
  std::vector<OutputEvent> reasoning_events, out;
  reasoning_.feed(piece, reasoning_events);
  route(reasoning_events, out);
  return out;
}

std::vector<OutputEvent> OutputParser::finish() {
  std::vector<OutputEvent> reasoning_events, out;
  reasoning_.finish(reasoning_events);
  route(reasoning_events, out);
  tools_.finish(out);
  return out;
}

ParsedOutput OutputParser::result() const {
  return {tools_.content(), reasoning_.reasoning(), tools_.tool_calls()};
}

ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options, ToolCallIdGenerator ids) {
  OutputParser parser(options, std::move(ids));
  parser.feed(text);
  parser.finish();
  return parser.result();
}

}  // namespace corvid::chat
