// The chat side of `corvid generate` and `corvid chat`: the prompt rendered by the
// model's own chat template, and the reply streamed with reasoning and tool calls
// taken apart by the model family's output parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/chat/chat_template.h"
#include "corvid/chat/output_parser.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid::cli {

// The model's chat template, or nothing when it ships none (then prompts go in raw).
std::optional<ChatTemplate> load_chat_template(const std::string& model_path);

// Renders messages (with the generation prompt) and tokenizes the text as transformers'
// apply_chat_template(tokenize=True) does: the template writes BOS itself.
struct RenderedPrompt {
  std::string text;
  std::vector<int32_t> ids;
};
RenderedPrompt render_prompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& kwargs);

// Streams a reply: the answer to stdout as it arrives, reasoning to stderr (dimmed on
// a terminal) so `> file` keeps only the answer, tool calls as lines after it.
class ReplyPrinter {
 public:
  // parse_template_source: the template whose family decides the reasoning/tool
  // formats; empty for a raw prompt (text printed as is, special tokens hidden).
  ReplyPrinter(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids, const std::string& parse_template_source,
               const std::string& rendered_prompt);
  void prime(const std::vector<int32_t>& prompt_ids);
  bool push(int32_t id);              // for Session::generate's callback
  chat::ParsedOutput finish();        // flushes; the whole reply, taken apart

 private:
  void print(const std::vector<chat::OutputEvent>& events);

  StreamingDetokenizer detok_;
  std::vector<int32_t> stop_ids_;
  chat::OutputParser parser_;
  bool reasoning_open_ = false;
  bool stderr_tty_ = false;
};

}  // namespace corvid::cli
