// The Anthropic Messages request side: bodies of /v1/messages and
// /v1/messages/count_tokens turned into the chat template's messages (system, tool
// calls, tool results and reasoning in the OpenAI form the templates take) and the
// engine's parameters. Every field outside what corvid does is a 400 naming it, and
// so is what it cannot honour yet (images, forced tool choice).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "corvid/chat/chat_template.h"
#include "corvid/engine/request.h"
#include "corvid/server/output_format.h"
#include "corvid/server/request_fields.h"

namespace corvid::server {

struct MessageParams {
  std::string model;             // as the client named it ("" when absent)
  GenerationRequest generation;  // sampling and stop strings; prompt left empty
  int64_t max_tokens = 0;        // required on /v1/messages
  bool stream = false;
  ChatRequest chat;              // messages, tools, thinking switch, prefill
  bool parse_tools = false;      // tools given and tool_choice is not "none"
  std::optional<ToolForcing> forcing;  // tool_choice any or tool: the reply is held to the call(s)
  std::optional<OutputFormat> format;  // the forced call's format
  bool omit_thinking = false;    // thinking.display "omitted": blocks come back without their text
  // thinking.budget_tokens: open reasoning is closed after about this many tokens.
  std::optional<int64_t> thinking_budget;
};

// POST /v1/messages.
MessageParams parse_message_request(const Json& body);
// POST /v1/messages/count_tokens: the same conversation fields, no generation ones.
MessageParams parse_count_tokens_request(const Json& body);

// Refuses a thinking switch the template cannot honour: `enabled` on a template that has
// neither enable_thinking nor reasoning of its own, `disabled` on one that reasons
// without an enable_thinking to turn it off, a budget where corvid cannot tell the
// reasoning apart. (adaptive is always the template's way.)
void check_thinking_switch(const MessageParams& params, bool template_has_switch, bool template_reasons);

// Anthropic's error shape, {"type": "error", "error": {"type", "message"}}, and its
// type word for a status ("invalid_request_error", "request_too_large", ...).
const char* anthropic_error_type(int status);
Json anthropic_error_body(int status, const std::string& message);

// The routes that answer in Anthropic's shapes (/v1/messages and below).
bool is_anthropic_path(std::string_view path);

}  // namespace corvid::server
