// Reasoning ("thinking") split off generated text, incrementally.
//
// Each family marks reasoning its own way; the parser turns the stream into reasoning
// deltas and content deltas, holding back text that may be the start of a marker so a
// marker split across tokens never leaks. The templates write reasoning back as
// "<think>\n" + reasoning + "\n</think>\n\n" + content (stripping the newlines when they
// read it), so whitespace around the reasoning is not part of either field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "corvid/chat/stream_markers.h"

namespace corvid::chat {

enum class ReasoningFormat {
  kNone,       // everything is content
  kThinkTags,  // <think>...</think>: Qwen3, QwQ, DeepSeek-R1, SmolLM3, MiniCPM5, ...
  kGemma4,     // <|channel>thought\n...<channel|>
  kMistral,    // [THINK]...[/THINK]: Magistral, Ministral 3 reasoning
  kHarmony,    // gpt-oss: <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...
};

// "none", "think", "gemma4", "mistral", "harmony"; throws on others.
ReasoningFormat reasoning_format_from_name(std::string_view name);
std::string_view reasoning_format_name(ReasoningFormat format);

// The markers a chat template uses for reasoning; kNone if it has none.
ReasoningFormat detect_reasoning_format(std::string_view template_source);

// Whether the rendered prompt already opened reasoning (e.g. Qwen3.5 and DeepSeek-R1 end
// the generation prompt with "<think>\n"), so generation starts inside it.
bool prompt_opens_reasoning(std::string_view rendered_prompt, ReasoningFormat format);

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningFormat format, bool starts_in_reasoning = false);

  // Appends the events (kReasoning / kContent) the piece decides.
  void feed(std::string_view piece, std::vector<OutputEvent>& events);
  // Ends the stream; held text that was no marker is released.
  void finish(std::vector<OutputEvent>& events);

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  enum class State {
    kStart,           // nothing decided: the output may open reasoning
    kReasoningStart,  // inside reasoning, its leading whitespace not yet passed
    kReasoning,
    kAfterReasoning,  // reasoning closed; whitespace before the answer is dropped
    kContent,
    // harmony
    kHeader,          // reading a message header up to <|message|>
    kBody,            // inside a message body
  };
  enum class BodyKind { kReasoning, kContent, kToolCall };

  void process(bool at_end, std::vector<OutputEvent>& events);
  bool step_tags(bool at_end, std::vector<OutputEvent>& events);
  bool step_harmony(bool at_end, std::vector<OutputEvent>& events);
  void start_harmony_body(std::string_view header, std::vector<OutputEvent>& events);
  void emit(OutputEvent::Kind kind, std::string_view text, std::vector<OutputEvent>& events);

  ReasoningFormat format_;
  std::string_view open_;
  std::string_view close_;
  State state_;
  BodyKind body_kind_ = BodyKind::kContent;
  std::string pending_;
  bool finished_ = false;
  std::string reasoning_;
  std::string content_;
};

}  // namespace corvid::chat
