// libFuzzer target: arbitrary bytes as a chat template, parsed and rendered
// with a small conversation. Every failure must be a corvid::Error (syntax
// errors, runtime errors, limits, raise_exception); anything else — a crash,
// a sanitizer report, another exception type — is a finding. Good seeds are
// real chat templates (e.g. ../shared/chat-templates/*.jinja).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corvid/template/jinja.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const jinja::Json context = jinja::Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": null, "reasoning_content": "look it up",
       "tool_calls": [{"id": "abcdefghi", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "20C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "enable_thinking": true, "bos_token": "<s>", "eos_token": "</s>"})");
  jinja::Options options;
  options.max_steps = 100000;  // keeps each input fast; the limits themselves are under test too
  options.max_output_bytes = 1 << 20;
  options.now = [] { return std::tm{}; };
  try {
    jinja::Template tpl = jinja::Template::parse(std::string_view(reinterpret_cast<const char*>(data), size), options);
    tpl.render(context);
  } catch (const Error&) {
  }
  return 0;
}
