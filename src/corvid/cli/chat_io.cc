#include "corvid/cli/chat_io.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "corvid/core/error.h"

namespace corvid::cli {

std::optional<ChatTemplate> load_chat_template(const std::string& model_path) {
  try {
    return ChatTemplate::from_model(model_path);
  } catch (const jinja::TemplateError&) {
    throw;  // a template that exists but does not parse is an error, not "no template"
  } catch (const Error&) {
    return std::nullopt;
  }
}

RenderedPrompt render_prompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& kwargs) {
  ChatRequest request;
  request.messages = messages;
  request.add_generation_prompt = true;
  request.kwargs = kwargs;
  RenderedPrompt p;
  p.text = tmpl.render(request);
  p.ids = tokenizer.encode(p.text, /*add_special_tokens=*/false);
  return p;
}

namespace {
chat::OutputParserOptions parser_options(const std::string& source, const std::string& prompt) {
  if (source.empty()) return chat::OutputParserOptions{};
  return chat::detect_output_options(source, prompt);
}
}  // namespace

ReplyPrinter::ReplyPrinter(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids,
                           const std::string& parse_template_source, const std::string& rendered_prompt)
    // Markers such as [THINK] or <|channel|> are special tokens: keep them for the parser
    // (a raw prompt has no parser, so special tokens stay hidden there).
    : detok_(tokenizer, /*skip_special_tokens=*/parse_template_source.empty()),
      stop_ids_(std::move(stop_ids)),
      parser_(parser_options(parse_template_source, rendered_prompt)),
      stderr_tty_(isatty(STDERR_FILENO) != 0) {}

void ReplyPrinter::prime(const std::vector<int32_t>& prompt_ids) { detok_.prime(prompt_ids); }

bool ReplyPrinter::push(int32_t id) {
  // The end-of-turn token ends the reply; it is not part of it.
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) return true;
  print(parser_.feed(detok_.push(id)));
  return true;
}

chat::ParsedOutput ReplyPrinter::finish() {
  print(parser_.feed(detok_.flush()));
  print(parser_.finish());
  if (reasoning_open_) std::fprintf(stderr, stderr_tty_ ? "\033[0m\n" : "\n");
  reasoning_open_ = false;
  chat::ParsedOutput out = parser_.result();
  for (const chat::ToolCall& call : out.tool_calls)
    std::printf("\n[tool call %s] %s %s", call.id.c_str(), call.name.c_str(), call.arguments.c_str());
  std::fflush(stdout);
  return out;
}

void ReplyPrinter::print(const std::vector<chat::OutputEvent>& events) {
  for (const chat::OutputEvent& e : events) {
    if (e.kind == chat::OutputEvent::Kind::kReasoning) {
      if (!reasoning_open_) std::fputs(stderr_tty_ ? "\033[2m" : "[reasoning] ", stderr);
      reasoning_open_ = true;
      std::fwrite(e.text.data(), 1, e.text.size(), stderr);
      std::fflush(stderr);
    } else if (e.kind == chat::OutputEvent::Kind::kContent) {
      if (reasoning_open_) std::fputs(stderr_tty_ ? "\033[0m\n" : "\n", stderr);
      reasoning_open_ = false;
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    }
    // Tool calls are printed whole by finish().
  }
}

}  // namespace corvid::cli
