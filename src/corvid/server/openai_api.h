// The OpenAI request side: JSON bodies of /v1/chat/completions and /v1/completions
// turned into what the engine and the chat template take, with every bad field
// reported as an ApiError (status 400) naming the parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "corvid/chat/chat_template.h"
#include "corvid/engine/request.h"
#include "corvid/server/output_format.h"
#include "corvid/server/request_fields.h"

namespace corvid::server {

// OpenAI's error shape, {"error": {"message", "type", "param", "code"}}, and its type
// word for a status ("invalid_request_error", "authentication_error", ...).
const char* error_type(int status);
Json error_body(int status, const std::string& message, const std::string& param = "", const std::string& code = "");

// What both endpoints share: sampling, limits, stop strings, logprobs, streaming.
struct CommonParams {
  std::string model;                // as the client named it ("" when absent)
  GenerationRequest generation;     // prompt left empty
  std::optional<int64_t> max_tokens;  // unset: as many as fit
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  int n = 1;                        // choices
  // Structured output: response_format or vLLM's structured_outputs / guided_* fields
  // (server/output_format.h), compiled by the server.
  std::optional<OutputFormat> format;
};

struct ChatParams {
  CommonParams common;
  ChatRequest chat;         // messages, tools, add_generation_prompt
  bool parse_tools = true;  // false for tool_choice "none" (or no tools)
  std::optional<ToolForcing> forcing;  // tool_choice required or a named function
};

struct CompletionParams {
  CommonParams common;
  std::string prompt_text;            // when the prompt is text
  std::vector<int32_t> prompt_tokens;  // when it is token ids
  bool prompt_is_tokens = false;
};

// Parses the body text (400 on bad JSON or a body that is not an object).
Json parse_body(const std::string& body);
ChatParams parse_chat_request(const Json& body);
CompletionParams parse_completion_request(const Json& body);

// Messages as the chat templates take them: content parts joined into text, tool-call
// arguments given as JSON text parsed into objects (as vLLM does for templates that
// index them), unknown roles refused.
Json normalize_messages(const Json& messages);

}  // namespace corvid::server
