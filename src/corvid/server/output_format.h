// The structured-output fields of every API, read into one OutputFormat
// (engine/structured_output.h) or a forced tool call:
// - OpenAI chat and completions: `response_format` {type: text | json_object |
//   json_schema {name, schema, strict, description}};
// - vLLM's extension fields: `structured_outputs` {json, regex, choice, grammar,
//   json_object, disable_any_whitespace} and the older `guided_json`, `guided_regex`,
//   `guided_choice`, `guided_grammar` (with `guided_decoding_backend` auto/xgrammar);
// - Responses: `text.format` {type: text | json_object | json_schema {name, schema,
//   strict}};
// - tool_choice `required` / a named function (chat, Responses) and Anthropic's `any`
//   / `tool`: the reply is held to the tools' argument schemas (ToolForcing).
// At most one format per request; anything malformed is a 400 naming the field.
#pragma once

#include <optional>
#include <string>

#include "corvid/engine/structured_output.h"
#include "corvid/server/request_fields.h"

namespace corvid::server {

// response_format (where: its field name, e.g. "response_format" or "text.format").
std::optional<OutputFormat> parse_response_format(const Json* format, const std::string& where);
// vLLM's structured_outputs object and guided_* fields of `body` (nothing when absent).
std::optional<OutputFormat> parse_vllm_structured_outputs(const Json& body);
// The one format of a request from either source; two at once is a 400.
std::optional<OutputFormat> one_format(std::optional<OutputFormat> a, std::optional<OutputFormat> b);

// A tool call the reply must make: the model writes JSON that the format holds to, and
// the server turns it into the API's tool calls.
struct ToolForcing {
  enum class Mode {
    Named,     // the output is `name`'s arguments (one JSON object)
    Required,  // the output is [{"name", "parameters"}, ...], at least one (vLLM's form)
  };
  Mode mode = Mode::Named;
  std::string name;  // Named: the function
  bool single = false;  // Required: at most one call (parallel_tool_calls false)
};

// The format that makes a reply a forced tool call: `tools` as OpenAI's chat API lists
// them ([{type: function, function: {name, parameters}}]). A named function that is
// not among them is a 400 naming `where`.
OutputFormat tool_forcing_format(const Json& tools, const ToolForcing& forcing, const std::string& where);

// The tool calls a forced reply's text holds: [{name, arguments (JSON text)}]. An
// unfinished or malformed text (cut by max_tokens) gives nothing.
struct ForcedCall {
  std::string name, arguments;
};
std::vector<ForcedCall> forced_tool_calls(const std::string& text, const ToolForcing& forcing);

// An EBNF grammar whose language is exactly `choices` (vLLM's guided_choice).
std::string choice_grammar(const std::vector<std::string>& choices);

}  // namespace corvid::server
