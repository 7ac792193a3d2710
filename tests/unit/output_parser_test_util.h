// Shared by the ToolCallParser / ReasoningParser / OutputParser tests: runs a parser over
// every way of splitting a text into pieces and checks that the streamed events add up
// to the same result as parsing the text whole.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "corvid/chat/output_parser.h"

namespace corvid::chat::testing {

constexpr std::uint64_t kIdSeed = 7;

struct ExpectedCall {
  std::string name;
  std::string arguments;  // compact JSON
};

struct Expected {
  std::string content;
  std::string reasoning;
  std::vector<ExpectedCall> calls;
};

// What the events of one run add up to.
inline ParsedOutput accumulate(const std::vector<OutputEvent>& events, std::string& error) {
  ParsedOutput out;
  for (const OutputEvent& e : events) {
    switch (e.kind) {
      case OutputEvent::Kind::kContent: out.content += e.text; break;
      case OutputEvent::Kind::kReasoning: out.reasoning_content += e.text; break;
      case OutputEvent::Kind::kToolCallStart:
        if (e.tool_index != out.tool_calls.size()) error = "tool call start out of order";
        out.tool_calls.push_back({e.id, e.name, ""});
        break;
      case OutputEvent::Kind::kToolCallArguments:
        if (e.tool_index + 1 != out.tool_calls.size()) error = "argument delta for a call that is not the last";
        else out.tool_calls.back().arguments += e.text;
        break;
    }
  }
  return out;
}

inline std::string describe(const ParsedOutput& out) {
  std::ostringstream s;
  s << "content=[" << out.content << "] reasoning=[" << out.reasoning_content << "] calls=";
  for (const ToolCall& c : out.tool_calls) s << "{" << c.id << " " << c.name << " " << c.arguments << "}";
  return s.str();
}

inline bool same(const ParsedOutput& a, const ParsedOutput& b) {
  if (a.content != b.content || a.reasoning_content != b.reasoning_content) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (std::size_t i = 0; i < a.tool_calls.size(); ++i) {
    const ToolCall &x = a.tool_calls[i], &y = b.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments != y.arguments) return false;
  }
  return true;
}

inline ParsedOutput expected_output(const Expected& expected) {
  ParsedOutput out{expected.content, expected.reasoning, {}};
  ToolCallIdGenerator ids(kIdSeed);
  for (const ExpectedCall& c : expected.calls) out.tool_calls.push_back({ids.next(), c.name, c.arguments});
  return out;
}

// Runs the parser over `text` cut at `cuts`; returns "" or what went wrong.
inline std::string check_split(const OutputParserOptions& options, std::string_view text,
                               const std::vector<std::size_t>& cuts, const ParsedOutput& want) {
  OutputParser parser(options, ToolCallIdGenerator(kIdSeed));
  std::vector<OutputEvent> events;
  std::size_t begin = 0;
  try {
    for (std::size_t cut : cuts) {
      for (OutputEvent& e : parser.feed(text.substr(begin, cut - begin))) events.push_back(std::move(e));
      begin = cut;
    }
    for (OutputEvent& e : parser.feed(text.substr(begin))) events.push_back(std::move(e));
    for (OutputEvent& e : parser.finish()) events.push_back(std::move(e));
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
  for (const OutputEvent& e : events)
    if ((e.kind == OutputEvent::Kind::kContent || e.kind == OutputEvent::Kind::kReasoning) && e.text.empty())
      return "empty text delta";
  std::string error;
  ParsedOutput streamed = accumulate(events, error);
  if (!error.empty()) return error;
  if (!same(streamed, parser.result()))
    return "events " + describe(streamed) + " differ from result " + describe(parser.result());
  if (!same(streamed, want)) return "got " + describe(streamed) + " want " + describe(want);
  return "";
}

inline std::string cuts_text(const std::vector<std::size_t>& cuts) {
  std::string s;
  for (std::size_t c : cuts) s += std::to_string(c) + " ";
  return s;
}

// Whole, char by char, and every one- and two-cut split of `text` give `expected`.
inline void expect_every_split(const OutputParserOptions& options, std::string_view text, const Expected& expected) {
  ParsedOutput want = expected_output(expected);
  std::string problem = check_split(options, text, {}, want);
  if (!problem.empty()) {
    ADD_FAILURE() << "whole text: " << problem;
    return;
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
  problem = check_split(options, text, every, want);
  if (!problem.empty()) {
    ADD_FAILURE() << "char by char: " << problem;
    return;
  }
  for (std::size_t i = 0; i <= text.size(); ++i) {
    for (std::size_t j = i; j <= text.size(); ++j) {
      std::vector<std::size_t> cuts = i == j ? std::vector<std::size_t>{i} : std::vector<std::size_t>{i, j};
      problem = check_split(options, text, cuts, want);
      if (!problem.empty()) {
        ADD_FAILURE() << "cuts at " << cuts_text(cuts) << ": " << problem;
        return;
      }
    }
  }
}

inline OutputParserOptions tool_options(ToolFormat format, nlohmann::json tools = nlohmann::json::array()) {
  OutputParserOptions options;
  options.tools_format = format;
  options.tools = std::move(tools);
  return options;
}

inline OutputParserOptions reasoning_options(ReasoningFormat format, bool starts_in_reasoning = false) {
  OutputParserOptions options;
  options.reasoning = format;
  options.starts_in_reasoning = starts_in_reasoning;
  return options;
}

}  // namespace corvid::chat::testing
