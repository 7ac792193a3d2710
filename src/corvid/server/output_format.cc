#include "corvid/server/output_format.h"

#include <cstdio>

namespace corvid::server {

namespace {

// A schema given as an object (OpenAI) or as JSON text (vLLM accepts both).
std::string schema_text(const Json& schema, const std::string& where) {
  if (schema.is_object() || schema.is_boolean()) return schema.dump();
  if (schema.is_string()) {
    const Json parsed = Json::parse(schema.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      bad(where, "'" + where + "' must be a JSON Schema (an object, or its JSON text)");
    return parsed.dump();
  }
  bad(where, "'" + where + "' must be a JSON Schema object");
}

OutputFormat json_schema(const Json& schema, const std::string& where) {
  OutputFormat f;
  f.kind = OutputFormat::Kind::JsonSchema;
  f.spec = schema_text(schema, where);
  return f;
}

std::vector<std::string> choices_of(const Json& list, const std::string& where) {
  if (!list.is_array() || list.empty()) bad(where, "'" + where + "' must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const Json& c : list) {
    if (!c.is_string()) bad(where, "'" + where + "' must be a non-empty list of strings");
    out.push_back(c.get<std::string>());
  }
  return out;
}

OutputFormat from_text_spec(OutputFormat::Kind kind, const Json& value, const std::string& where) {
  if (!value.is_string() || value.get<std::string>().empty()) bad(where, "'" + where + "' must be a non-empty string");
  OutputFormat f;
  f.kind = kind;
  f.spec = value.get<std::string>();
  return f;
}

}  // namespace

std::string choice_grammar(const std::vector<std::string>& choices) {
  std::string g = "root ::=";
  for (size_t i = 0; i < choices.size(); ++i) {
    g += i ? " | \"" : " \"";
    for (unsigned char ch : choices[i]) {
      if (ch == '"' || ch == '\\') {
        g += '\\';
        g += static_cast<char>(ch);
      } else if (ch < 0x20 || ch == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", ch);
        g += buf;
      } else {
        g += static_cast<char>(ch);  // UTF-8 passes through
      }
    }
    g += '"';
  }
  return g;
}

std::optional<OutputFormat> parse_response_format(const Json* format, const std::string& where) {
  if (!format) return std::nullopt;
  if (!format->is_object()) bad(where, "'" + where + "' must be an object with a 'type'");
  const std::string type = type_of(*format, where);
  if (type == "text") {
    only_fields(*format, {"type"}, where);
    return std::nullopt;
  }
  if (type == "json_object") {
    only_fields(*format, {"type"}, where);
    OutputFormat f;
    f.kind = OutputFormat::Kind::Json;
    f.object_only = true;
    return f;
  }
  if (type != "json_schema") bad(where + ".type", "'" + where + ".type' must be text, json_object or json_schema");
  // Chat nests the schema under json_schema; Responses' text.format holds it directly.
  const bool nested = format->contains("json_schema");
  const Json& spec = nested ? (*format)["json_schema"] : *format;
  const std::string at = nested ? where + ".json_schema" : where;
  if (nested) only_fields(*format, {"type", "json_schema"}, where);
  if (!spec.is_object()) bad(at, "'" + at + "' must be an object with 'name' and 'schema'");
  only_fields(spec, nested ? std::initializer_list<const char*>{"name", "schema", "strict", "description"}
                           : std::initializer_list<const char*>{"type", "name", "schema", "strict", "description"},
              at);
  const std::optional<std::string> name = string_field(spec, "name", at);
  if (!name || name->empty()) bad(at + ".name", "'" + at + ".name' is required");
  boolean(spec, "strict", at);  // strict or not, the reply is held to the schema
  string_field(spec, "description", at);
  const Json* schema = field(spec, "schema");
  // OpenAI allows a schema-less json_schema: any JSON object then.
  if (!schema) return OutputFormat{OutputFormat::Kind::Json, "", true};
  return json_schema(*schema, at + ".schema");
}

std::optional<OutputFormat> parse_vllm_structured_outputs(const Json& body) {
  std::optional<OutputFormat> out;
  auto set = [&](OutputFormat f, const std::string& where) {
    if (out) bad(where, "only one structured output may be given ('" + where + "' is a second)");
    out = std::move(f);
  };
  if (const Json* so = field(body, "structured_outputs")) {
    if (!so->is_object()) bad("structured_outputs", "'structured_outputs' must be an object");
    only_fields(*so, {"json", "regex", "choice", "grammar", "json_object", "disable_any_whitespace"},
                "structured_outputs");
    if (const Json* v = field(*so, "json")) set(json_schema(*v, "structured_outputs.json"), "structured_outputs.json");
    if (const Json* v = field(*so, "regex"))
      set(from_text_spec(OutputFormat::Kind::Regex, *v, "structured_outputs.regex"), "structured_outputs.regex");
    if (const Json* v = field(*so, "grammar"))
      set(from_text_spec(OutputFormat::Kind::Grammar, *v, "structured_outputs.grammar"), "structured_outputs.grammar");
    if (const Json* v = field(*so, "choice"))
      set(OutputFormat{OutputFormat::Kind::Grammar, choice_grammar(choices_of(*v, "structured_outputs.choice"))},
          "structured_outputs.choice");
    if (boolean(*so, "json_object", "structured_outputs").value_or(false))
      set(OutputFormat{OutputFormat::Kind::Json, "", true}, "structured_outputs.json_object");
    // corvid's JSON is compact unless this is false (vLLM's default is free whitespace).
    if (const std::optional<bool> compact = boolean(*so, "disable_any_whitespace", "structured_outputs")) {
      if (!out || (out->kind != OutputFormat::Kind::JsonSchema && out->kind != OutputFormat::Kind::Json))
        bad("structured_outputs.disable_any_whitespace", "'disable_any_whitespace' applies to JSON only");
      out->any_whitespace = !*compact;
    }
  }
  if (const Json* v = field(body, "guided_json")) set(json_schema(*v, "guided_json"), "guided_json");
  if (const Json* v = field(body, "guided_regex"))
    set(from_text_spec(OutputFormat::Kind::Regex, *v, "guided_regex"), "guided_regex");
  if (const Json* v = field(body, "guided_grammar"))
    set(from_text_spec(OutputFormat::Kind::Grammar, *v, "guided_grammar"), "guided_grammar");
  if (const Json* v = field(body, "guided_choice"))
    set(OutputFormat{OutputFormat::Kind::Grammar, choice_grammar(choices_of(*v, "guided_choice"))}, "guided_choice");
  if (const std::optional<std::string> backend = string_field(body, "guided_decoding_backend")) {
    if (*backend != "auto" && *backend != "xgrammar")
      bad("guided_decoding_backend", "'guided_decoding_backend' must be auto or xgrammar (corvid's), not '" + *backend + "'");
  }
  return out;
}

std::optional<OutputFormat> one_format(std::optional<OutputFormat> a, std::optional<OutputFormat> b) {
  if (a && b) bad("response_format", "give one structured output: response_format or vLLM's structured_outputs, not both");
  return a ? a : b;
}

OutputFormat tool_forcing_format(const Json& tools, const ToolForcing& forcing, const std::string& where) {
  auto parameters = [](const Json& fn) {
    const Json* p = field(fn, "parameters");
    return p && p->is_object() ? *p : Json{{"type", "object"}};
  };
  if (forcing.mode == ToolForcing::Mode::Named) {
    for (const Json& t : tools)
      if (t.contains("function") && t["function"].value("name", "") == forcing.name)
        return OutputFormat{OutputFormat::Kind::JsonSchema, parameters(t["function"]).dump()};
    bad(where, "the tool '" + forcing.name + "' named by '" + where + "' is not in 'tools'");
  }
  Json any = Json::array();
  for (const Json& t : tools) {
    if (!t.contains("function")) continue;
    const Json& fn = t["function"];
    any.push_back(Json{{"type", "object"},
                       {"properties", {{"name", {{"const", fn.value("name", "")}}}, {"parameters", parameters(fn)}}},
                       {"required", {"name", "parameters"}},
                       {"additionalProperties", false}});
  }
  Json schema{{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any}}}};
  if (forcing.single) schema["maxItems"] = 1;
  return OutputFormat{OutputFormat::Kind::JsonSchema, schema.dump()};
}

std::vector<ForcedCall> forced_tool_calls(const std::string& text, const ToolForcing& forcing) {
  const Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return {};
  if (forcing.mode == ToolForcing::Mode::Named) {
    if (!parsed.is_object()) return {};
    return {ForcedCall{forcing.name, parsed.dump()}};
  }
  std::vector<ForcedCall> calls;
  if (!parsed.is_array()) return calls;
  for (const Json& c : parsed)
    if (c.is_object() && c.contains("name") && c["name"].is_string() && c.contains("parameters"))
      calls.push_back({c["name"].get<std::string>(), c["parameters"].dump()});
  return calls;
}

}  // namespace corvid::server
