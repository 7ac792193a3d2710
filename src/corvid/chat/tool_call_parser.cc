#include "corvid/chat/tool_call_parser.h"

#include <array>
#include <utility>

#include "corvid/chat/tool_formats.h"
#include "corvid/core/error.h"

namespace corvid::chat {
namespace {

constexpr std::array<std::pair<ToolFormat, std::string_view>, 13> kFormatNames{{
    {ToolFormat::kNone, "none"},
    {ToolFormat::kHermes, "hermes"},
    {ToolFormat::kXmlFunction, "xml"},
    {ToolFormat::kMiniCpm, "minicpm"},
    {ToolFormat::kLlama3, "llama3"},
    {ToolFormat::kMistral, "mistral"},
    {ToolFormat::kGemma4, "gemma4"},
    {ToolFormat::kHarmony, "harmony"},
    {ToolFormat::kDeepSeek, "deepseek"},
    {ToolFormat::kKimi, "kimi"},
    {ToolFormat::kGlm, "glm"},
    {ToolFormat::kForcedList, "forced"},
    {ToolFormat::kForcedNamed, "forced-named"},
}};

// No tool calls: never starts a region.
class NoSyntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view, bool) const override { return {}; }
  RegionScan scan(std::string_view text, bool) const override {
    return {true, text.size(), std::nullopt};
  }
};

std::unique_ptr<ToolCallSyntax> make_syntax(ToolFormat format, const nlohmann::json& tools) {
  switch (format) {
    case ToolFormat::kNone: return std::make_unique<NoSyntax>();
    case ToolFormat::kHermes: return make_hermes_syntax();
    case ToolFormat::kXmlFunction: return make_xml_function_syntax(tools);
    case ToolFormat::kMiniCpm: return make_minicpm_syntax(tools);
    case ToolFormat::kLlama3: return make_llama3_syntax();
    case ToolFormat::kMistral: return make_mistral_syntax();
    case ToolFormat::kGemma4: return make_gemma4_syntax();
    case ToolFormat::kHarmony: return make_harmony_syntax();
    case ToolFormat::kDeepSeek: return make_deepseek_syntax();
    case ToolFormat::kKimi: return make_kimi_syntax();
    case ToolFormat::kGlm: return make_glm_syntax(tools);
    case ToolFormat::kForcedList: return make_forced_list_syntax();
    case ToolFormat::kForcedNamed: return make_forced_named_syntax(tools);
  }
  fail("tool call parser: unknown format");
}

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

}  // namespace

ToolFormat tool_format_from_name(std::string_view name) {
  for (const auto& [format, format_name] : kFormatNames)
    if (format_name == name) return format;
  fail("unknown tool call format '", name,
       "' (expected none, hermes, xml, minicpm, llama3, mistral, gemma4, harmony, deepseek, kimi or glm)");
}

std::string_view tool_format_name(ToolFormat format) {
  for (const auto& [known, name] : kFormatNames)
    if (known == format) return name;
  return "none";
}

ToolFormat detect_tool_format(std::string_view source) {
  // Most specific first: the XML templates also contain "<tool_call>", Hermes-on-Llama
  // templates contain Llama header tokens.
  if (contains(source, "<|tool_call>call:")) return ToolFormat::kGemma4;
  if (contains(source, "<arg_key>")) return ToolFormat::kGlm;
  if (contains(source, "<｜tool▁call▁begin｜>") && contains(source, "<｜tool▁sep｜>")) return ToolFormat::kDeepSeek;
  if (contains(source, "<|tool_call_begin|>") && contains(source, "<|tool_call_argument_begin|>")) return ToolFormat::kKimi;
  if (contains(source, "<function=") && contains(source, "<parameter=")) return ToolFormat::kXmlFunction;
  if (contains(source, "<function name=") && contains(source, "<param name=")) return ToolFormat::kMiniCpm;
  if (contains(source, "[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (contains(source, "to=functions.") || (contains(source, "<|call|>") && contains(source, "<|channel|>")))
    return ToolFormat::kHarmony;
  if (contains(source, "<tool_call>")) return ToolFormat::kHermes;
  // Llama 3.x renders a call as '{"name": "' + name + '", "parameters": ' + args; the
  // functionary templates share the header tokens but not this.
  if (contains(source, "<|start_header_id|>") && contains(source, "\"parameters\": ")) return ToolFormat::kLlama3;
  return ToolFormat::kNone;
}

ToolCallIdGenerator::ToolCallIdGenerator() : engine_(std::random_device{}()) {}
ToolCallIdGenerator::ToolCallIdGenerator(std::uint64_t seed) : engine_(seed) {}

std::string ToolCallIdGenerator::next() {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<std::size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(engine_)];
  return id;
}

ToolCallParser::ToolCallParser(ToolFormat format, nlohmann::json tools, ToolCallIdGenerator ids)
    : syntax_(make_syntax(format, tools)), ids_(std::move(ids)) {}
ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;
ToolCallParser& ToolCallParser::operator=(ToolCallParser&&) noexcept = default;

void ToolCallParser::feed(std::string_view piece, std::vector<OutputEvent>& events) {
  CORVID_CHECK(!finished_, "tool call parser: feed after finish");
  pending_ += piece;
  process(false, events);
}

void ToolCallParser::finish(std::vector<OutputEvent>& events) {
  if (finished_) return;
  process(true, events);
  // Whitespace after the last call is the template's separator, not an answer.
  if (!last_was_call_ && !held_space_.empty()) {
    content_ += held_space_;
    events.push_back({OutputEvent::Kind::kContent, held_space_, 0, {}, {}});
  }
  held_space_.clear();
  finished_ = true;
}

void ToolCallParser::process(bool at_end, std::vector<OutputEvent>& events) {
  while (!pending_.empty()) {
    if (!in_call_region_) {
      RegionStart start = syntax_->find_start(pending_, output_started_);
      if (!start.found) {
        std::size_t keep = at_end ? 0 : start.hold;
        emit_content(std::string_view(pending_).substr(0, pending_.size() - keep), events);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      emit_content(std::string_view(pending_).substr(0, start.pos), events);
      pending_.erase(0, start.pos);
      in_call_region_ = true;
      continue;
    }
    RegionScan scan = syntax_->scan(pending_, at_end);
    if (!scan.complete) {
      CORVID_CHECK(!at_end, "tool call parser: format left a region undecided at the end");
      return;
    }
    CORVID_CHECK(scan.length > 0 && scan.length <= pending_.size(),
                 "tool call parser: format returned a bad region length");
    in_call_region_ = false;
    if (scan.calls) {
      held_space_.clear();  // whitespace before a call separates it from the answer
      for (ParsedCall& call : *scan.calls) emit_call(std::move(call), events);
      output_started_ = true;
      if (!scan.calls->empty()) last_was_call_ = true;
    } else {
      // Malformed call: the model's text goes to the answer unchanged rather than
      // failing the request; the client sees exactly what the model wrote.
      emit_content(std::string_view(pending_).substr(0, scan.length), events);
    }
    pending_.erase(0, scan.length);
  }
}

void ToolCallParser::emit_content(std::string_view text, std::vector<OutputEvent>& events) {
  std::string_view body = trim_trailing_spaces(text);
  std::string_view trailing_space = text.substr(body.size());
  if (!body.empty()) {
    std::string delta = std::move(held_space_);
    held_space_.clear();
    // Whitespace that follows a call is dropped the same way whitespace before a call
    // is: it is the template's separator and would otherwise lead the answer.
    if (last_was_call_) {
      delta.clear();
      body = trim_leading_spaces(body);
    }
    delta += body;
    content_ += delta;
    events.push_back({OutputEvent::Kind::kContent, std::move(delta), 0, {}, {}});
    output_started_ = true;
    last_was_call_ = false;
  }
  held_space_ += trailing_space;
}

void ToolCallParser::emit_call(ParsedCall call, std::vector<OutputEvent>& events) {
  // Compact JSON; text values come from the model (XML/Gemma formats) and may hold
  // invalid UTF-8, which dump() would throw on: replace it instead.
  std::string arguments = call.arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  ToolCall done{ids_.next(), std::move(call.name), std::move(arguments)};
  std::size_t index = calls_.size();
  events.push_back({OutputEvent::Kind::kToolCallStart, {}, index, done.id, done.name});
  events.push_back({OutputEvent::Kind::kToolCallArguments, done.arguments, index, {}, {}});
  calls_.push_back(std::move(done));
}

ToolParseResult parse_tool_calls(std::string_view text, ToolFormat format,
                                 const nlohmann::json& tools, ToolCallIdGenerator ids) {
  ToolCallParser parser(format, tools, std::move(ids));
  std::vector<OutputEvent> events;
  parser.feed(text, events);
  parser.finish(events);
  return {parser.content(), parser.tool_calls()};
}

}  // namespace corvid::chat
