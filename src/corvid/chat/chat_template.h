// A model's chat template: messages (+ tools, + options) -> the prompt text.
//
// The oracle is transformers' `tokenizer.apply_chat_template(..., tokenize=False)`:
// render() returns exactly its text, including what transformers does around the
// Jinja template (dropping None-valued message keys, the reasoning-field aliases,
// picking a named template, continue_final_message tagging and trimming) and raises
// the same messages where it raises. tests/fixtures/templates holds its outputs for
// every template in tests/data/chat-templates.
//
// Errors: the template's own raise_exception(msg) arrives as jinja::RaisedException
// (what() == msg); problems with the template itself as jinja::TemplateError; the
// checks transformers makes around the template (empty conversation,
// continue_final_message, ...) as corvid::Error with transformers' message.
#pragma once

#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "corvid/template/jinja.h"

namespace corvid {

struct ChatRequest {
  jinja::Json messages = jinja::Json::array();  // [{"role": ..., "content": ...}, ...]
  jinja::Json tools;                            // null: no tools (the template sees None)
  bool add_generation_prompt = false;           // transformers' default
  // "": off; "content" (transformers' continue_final_message=True) or another field
  // of the final message (e.g. "reasoning_content") to leave open for the model.
  std::string continue_final_message;
  // Extra template variables (enable_thinking, reasoning_effort, ...); they override the
  // special tokens of the same name, as transformers' **kwargs do. "documents" is
  // transformers' documents argument.
  jinja::Json kwargs = jinja::Json::object();
  // Which named template to use ("" = transformers' choice: "tool_use" when tools are
  // given and the model has one, else "default").
  std::string template_name;
  // strftime_now's clock; empty = the current local time.
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // One template. special_tokens: {"bos_token": "<s>", ...} (transformers'
  // special_tokens_map: the tokens that are set, passed to the template as variables).
  ChatTemplate(std::string_view source, jinja::Json special_tokens);
  // Several named templates (a tokenizer_config list of {name, template}, or
  // chat_template.jinja + additional_chat_templates/*.jinja).
  ChatTemplate(const std::map<std::string, std::string>& named_sources, jinja::Json special_tokens);

  // The template of a model, as transformers finds it. path: a GGUF file (metadata
  // `tokenizer.chat_template`, `tokenizer.chat_template.<name>`; special tokens from
  // `tokenizer.ggml.*_token_id`) or a Hugging Face folder (`chat_template.jinja` and
  // `additional_chat_templates/*.jinja`, else tokenizer_config.json's `chat_template`;
  // special tokens from tokenizer_config.json, then special_tokens_map.json).
  // Throws when the model has no chat template.
  static ChatTemplate from_model(const std::string& path);
  // Just the special tokens of a model (for rendering another template with them).
  static jinja::Json special_tokens_of_model(const std::string& path);

  std::string render(const ChatRequest& request) const;

  // The source render() would use for these tools / this name (for messages and tests).
  const std::string& source(const ChatRequest& request) const;
  const jinja::Json& special_tokens() const { return special_tokens_; }

  // "YYYY-MM-DD" -> that day at 00:00:00 with weekday and day of year set (for --date).
  static std::tm parse_date(const std::string& yyyy_mm_dd);

  struct Named;  // one parsed template (or its parse error, raised only when used)

 private:
  const Named& select(const ChatRequest& request) const;

  std::map<std::string, std::shared_ptr<const Named>> templates_;  // "" for a single template
  jinja::Json special_tokens_;
};

}  // namespace corvid
