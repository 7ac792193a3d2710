// What every API's request parser shares: the error a client gets for a bad field,
// typed readers of optional fields that name the field when it is wrong, and the
// bounds on the lists a request carries (README "Request limits"): the body size
// limit (--max-body-mb) bounds their bytes, these their counts, so no field makes a
// request cost work out of proportion to what it asks for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid::server {

using Json = nlohmann::ordered_json;

// An error for the client. The route decides its wire shape (OpenAI's or Anthropic's).
class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "")
      : Error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};

constexpr size_t kMaxStopStrings = 16;  // OpenAI allows 4; vLLM and llama-server more
constexpr size_t kMaxStopBytes = 4096;  // all stop strings together (each is matched per token)
constexpr size_t kMaxMessages = 10000;
constexpr size_t kMaxTools = 512;       // OpenAI: 128; agents with many MCP servers pass more

// A 400 naming the parameter.
[[noreturn]] void bad(const std::string& param, const std::string& message);
// A 400 for a list over its bound: "'stop' has 17 strings; at most 16 are allowed".
[[noreturn]] void too_many(const char* field, size_t count, size_t limit, const char* what);

// The value of `key`, or nullptr when absent or null (clients send null for unset).
const Json* field(const Json& body, const char* key);
// Typed optional fields, range-checked; a wrong type or value is a 400 naming `key`
// (as "where.key" for a field of a nested object).
std::optional<double> number(const Json& body, const char* key, double lo, double hi, const std::string& where = "");
std::optional<int64_t> integer(const Json& body, const char* key, int64_t lo, int64_t hi, const std::string& where = "");
std::optional<bool> boolean(const Json& body, const char* key, const std::string& where = "");
std::optional<std::string> string_field(const Json& body, const char* key, const std::string& where = "");

// A 400 for the first key of `object` not in `known` ("unknown field 'where.key'"): a
// field corvid does not know is refused, not dropped, since a client relying on it would
// otherwise get an answer that quietly ignores what it asked for.
void only_fields(const Json& object, std::initializer_list<const char*> known, const std::string& where = "");

// The "type" string of a tagged object (a content block, an item, a tool choice); a 400
// naming `where` when the object or its type is missing.
std::string type_of(const Json& object, const std::string& where);
// A string field that must be there: a 400 naming "where.key" otherwise.
const std::string& required_string(const Json& object, const char* key, const std::string& where);

// What a chat template cannot honour of a request's thinking switch (the enable_thinking
// it sets, if any) and reasoning budget, as both chat APIs check it: turning reasoning on
// where the template has no enable_thinking and never reasons, off where it reasons with
// no enable_thinking to stop it, or a budget where corvid cannot read the reasoning (the
// budget closes it with the format's marker). Each API words its 400.
enum class ThinkingProblem { kNone, kCannotEnable, kCannotDisable, kBudgetUnreadable };
ThinkingProblem thinking_problem(std::optional<bool> enable_thinking, bool budget, bool template_has_switch,
                                 bool template_reasons);

// A request's `tools`: a list of at most kMaxTools entries, else a 400 naming 'tools'.
void check_tool_list(const Json& tools);

// Stop strings from `value` (a string, when one_allowed, or a list of strings) under the
// bounds above; empty strings are dropped. `param` names the field in errors.
std::vector<std::string> stop_strings(const Json& value, const char* param, bool one_allowed);

// Text parts joined with "\n" (how both APIs' text-only content lists reach templates).
void append_text(std::string& text, const std::string& part);

}  // namespace corvid::server
