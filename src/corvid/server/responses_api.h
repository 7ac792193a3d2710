// The OpenAI Responses request side: bodies of POST /v1/responses turned into Responses
// items (the form a stored response keeps, so that previous_response_id can rebuild the
// conversation), the chat template's messages made from those items, and the engine's
// parameters. Every field corvid does not know is a 400 naming it, and so is what it
// cannot honour yet (images and files, forced tool choice, structured output).
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

struct ResponseParams {
  std::string model;                  // as the client named it ("" when absent)
  GenerationRequest generation;       // sampling; prompt left empty
  std::optional<int64_t> max_output_tokens;  // unset: as many as fit
  bool stream = false;
  bool store = true;                  // OpenAI's default
  std::string previous_response_id;   // "" when absent
  std::optional<std::string> instructions;
  Json input = Json::array();         // this turn's input as Responses items (see normalize_input)
  Json tools = Json::array();         // as the client gave them (Responses' flat form), echoed back
  Json chat_tools;                    // the same in the templates' OpenAI form; null when none
  bool parse_tools = false;           // tools given and tool_choice is not "none"
  Json tool_choice = "auto";          // auto, none, required or {"type": "function", "name"} (echoed)
  std::optional<ToolForcing> forcing;  // required or a named function: the reply is held to the calls
  bool parallel_tool_calls = true;
  std::optional<OutputFormat> format;  // text.format json_object / json_schema (or the forced calls')
  Json text = {{"format", {{"type", "text"}}}};  // as given, echoed
  std::optional<std::string> effort;  // reasoning.effort
  std::optional<std::string> summary;  // reasoning.summary (only "auto": nothing is summarised)
  double temperature = 1.0, top_p = 1.0;  // as given, for the echo (the sampler takes floats)
  Json metadata = Json::object();
  std::optional<std::string> user, safety_identifier, prompt_cache_key;  // echoed, otherwise unused
};

// POST /v1/responses.
ResponseParams parse_response_request(const Json& body);

// The input as Responses items, checked: a string is one user message; messages get
// content part lists (input_text, or output_text for the assistant); function_call,
// function_call_output and reasoning items keep their fields.
Json normalize_input(const Json& input);

// Items (a conversation's history and this turn's input, or output items of a stored
// response) as the chat templates' OpenAI-form messages: instructions first as the
// system message; developer is system; a reasoning item is the reasoning_content of the
// assistant message that follows it, function_call items that message's tool_calls
// (arguments parsed into objects, as normalize_messages gives them) and
// function_call_output items tool messages (with the call's name, which some templates
// print). Items are trusted here: they come from normalize_input or from corvid's replies.
Json items_to_messages(const Json& items, const std::optional<std::string>& instructions);

// What reasoning.effort does to the chat request (README): "none" sets enable_thinking
// false; any other effort sets it true, or, when the template reads reasoning_effort
// (gpt-oss), passes low / medium / high to it instead (minimal as low, xhigh and max as
// high). Returns the reasoning budget the effort implies on an enable_thinking template:
// minimal 256 tokens, low 1024, medium 4096, high and above none.
std::optional<int64_t> apply_effort(const std::optional<std::string>& effort, bool template_reads_effort,
                                    ChatRequest& chat);

// Refuses an effort the template cannot honour (as Anthropic's thinking switch):
// reasoning on a template with no enable_thinking that never reasons, "none" on one that
// reasons without an enable_thinking to turn it off, a budget on a format corvid cannot read.
void check_effort(const ChatRequest& chat, bool budget, bool template_has_switch, bool template_reasons);

}  // namespace corvid::server
