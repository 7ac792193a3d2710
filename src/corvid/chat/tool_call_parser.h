// Tool calls out of generated text, one format per model family, incrementally.
//
// The parser is fed the text after reasoning has been split off and separates the
// answer (content) from tool calls. A call is held back whole until it is complete and
// valid, then emitted as a start event and one argument delta holding the compact JSON
// arguments. That is deliberate: a call whose JSON turns out malformed (or which the
// output ends in the middle of) is returned as content, and a stream cannot take back
// deltas it has already sent. OpenAI clients accumulate argument deltas, so one delta
// per call is a valid stream. Content outside calls streams as it arrives, except text
// that may begin a call marker (held until decided) and whitespace next to calls
// (dropped: the templates put newlines between calls that are not part of the answer).
//
// Every call gets a fresh "call_" id; ids the model writes itself (Mistral's [CALL_ID],
// Nemo's "id") are ignored. Note that Mistral's templates insist on 9-character ids
// when the history is rendered back, so a server must map ids for those templates.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/chat/stream_markers.h"

namespace corvid::chat {

enum class ToolFormat {
  kNone,      // no tool calls: everything is content
  kHermes,    // Hermes, Qwen2.5, Qwen3: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  kXmlFunction,  // Qwen3-Coder, Qwen3.5: <tool_call>\n<function=f>\n<parameter=p>\nv\n</parameter>\n</function>\n</tool_call>
  kMiniCpm,   // MiniCPM5: <function name="f"><param name="p">v or <![CDATA[v]]></param></function>
  kLlama3,    // Llama 3.1-3.3: the whole output is {"name": ..., "parameters": {...}} (after an optional <|python_tag|>)
  kMistral,   // [TOOL_CALLS][{"name": ..., "arguments": {...}}] or [TOOL_CALLS]f[CALL_ID]id[ARGS]{...}
  kGemma4,    // <|tool_call>call:f{key:<|"|>text<|"|>,n:1}<tool_call|>
  kHarmony,   // gpt-oss: <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
  kDeepSeek,  // DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
              // and R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>
  kKimi,      // Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|>...
  kGlm,       // GLM-4.5/4.6: <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
  // Forced calls (tool_choice required / a named function): structured output holds the
  // whole answer to JSON whatever the model's own format, as vLLM does.
  kForcedList,   // [{"name": ..., "parameters": {...}}, ...]
  kForcedNamed,  // the arguments object of the one tool in `tools`
};

// "none", "hermes", "xml", "minicpm", "llama3", "mistral", "gemma4", "harmony", "deepseek",
// "kimi", "glm"; throws on others.
ToolFormat tool_format_from_name(std::string_view name);
std::string_view tool_format_name(ToolFormat format);

// The format a chat template asks the model to use, recognized from how the template
// renders assistant tool calls back; kNone when it renders none.
ToolFormat detect_tool_format(std::string_view template_source);

// Tool call ids: "call_" + 24 random alphanumerics. Seed it in tests for stable ids.
class ToolCallIdGenerator {
 public:
  ToolCallIdGenerator();  // seeded from std::random_device
  explicit ToolCallIdGenerator(std::uint64_t seed);
  std::string next();

 private:
  std::mt19937_64 engine_;
};

// A call as a format parsed it, before it gets an id.
struct ParsedCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object
};

// How one format finds and reads calls; see tool_formats.h for the implementations.
class ToolCallSyntax;

class ToolCallParser {
 public:
  // `tools` is the request's OpenAI-style tools array; formats whose arguments are
  // text (the XML ones) use the parameter schemas to type the values.
  explicit ToolCallParser(ToolFormat format, nlohmann::json tools = nlohmann::json::array(),
                          ToolCallIdGenerator ids = ToolCallIdGenerator());
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  ToolCallParser& operator=(ToolCallParser&&) noexcept;

  // Appends the events the piece decides. Never throws on malformed model output.
  void feed(std::string_view piece, std::vector<OutputEvent>& events);
  // Ends the stream: releases what was held (as content unless it is a valid call).
  void finish(std::vector<OutputEvent>& events);

  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  void process(bool at_end, std::vector<OutputEvent>& events);
  void emit_content(std::string_view text, std::vector<OutputEvent>& events);
  void emit_call(ParsedCall call, std::vector<OutputEvent>& events);

  std::unique_ptr<ToolCallSyntax> syntax_;
  ToolCallIdGenerator ids_;
  std::string pending_;     // received, not yet decided
  std::string held_space_;  // whitespace after the last content or call; dropped if a call follows
  bool in_call_region_ = false;  // pending_ starts with a call marker
  bool output_started_ = false;  // non-whitespace content or a call has been seen
  bool last_was_call_ = false;
  bool finished_ = false;
  std::string content_;
  std::vector<ToolCall> calls_;
};

// Parses a whole output at once (the non-streaming path; same result as streaming).
struct ToolParseResult {
  std::string content;
  std::vector<ToolCall> tool_calls;
};
ToolParseResult parse_tool_calls(std::string_view text, ToolFormat format,
                                 const nlohmann::json& tools = nlohmann::json::array(),
                                 ToolCallIdGenerator ids = ToolCallIdGenerator());

}  // namespace corvid::chat
