#include "corvid/chat/reasoning_parser.h"

#include <array>
#include <utility>

#include "corvid/core/error.h"

namespace corvid::chat {
namespace {

constexpr std::array<std::pair<ReasoningFormat, std::string_view>, 5> kFormatNames{{
    {ReasoningFormat::kNone, "none"},
    {ReasoningFormat::kThinkTags, "think"},
    {ReasoningFormat::kGemma4, "gemma4"},
    {ReasoningFormat::kMistral, "mistral"},
    {ReasoningFormat::kHarmony, "harmony"},
}};

struct TagPair {
  std::string_view open;
  std::string_view close;
};

TagPair tags_of(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kThinkTags: return {"<think>", "</think>"};
    case ReasoningFormat::kGemma4: return {"<|channel>thought", "<channel|>"};
    case ReasoningFormat::kMistral: return {"[THINK]", "[/THINK]"};
    case ReasoningFormat::kNone:
    case ReasoningFormat::kHarmony: break;
  }
  return {};
}

// gpt-oss (harmony) message structure.
constexpr std::string_view kHarmonyMessage = "<|message|>";
constexpr std::string_view kHarmonyChannel = "<|channel|>";
constexpr std::string_view kHarmonyAnalysisOpen = "<|channel|>analysis<|message|>";
constexpr std::array<std::string_view, 4> kHarmonyHeaderStarts{"<|start|>", "<|channel|>", " to=", "<|constrain|>"};
constexpr std::array<std::string_view, 3> kHarmonyBodyEnds{"<|end|>", "<|return|>", "<|call|>"};
constexpr std::size_t kHarmonyMaxHeader = 256;  // a longer "header" is plain text, not harmony

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// The word after `key` in a harmony header ("analysis" after "<|channel|>").
std::string_view header_word(std::string_view header, std::string_view key) {
  std::size_t pos = header.find(key);
  if (pos == std::string_view::npos) return {};
  std::size_t begin = pos + key.size();
  std::size_t end = begin;
  while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
  return header.substr(begin, end - begin);
}

}  // namespace

ReasoningFormat reasoning_format_from_name(std::string_view name) {
  for (const auto& [format, format_name] : kFormatNames)
    if (format_name == name) return format;
  fail("unknown reasoning format '", name, "' (expected none, think, gemma4, mistral or harmony)");
}

std::string_view reasoning_format_name(ReasoningFormat format) {
  for (const auto& [known, name] : kFormatNames)
    if (known == format) return name;
  return "none";
}

ReasoningFormat detect_reasoning_format(std::string_view source) {
  if (contains(source, "<|channel|>analysis")) return ReasoningFormat::kHarmony;
  if (contains(source, "<|channel>thought")) return ReasoningFormat::kGemma4;
  if (contains(source, "[THINK]")) return ReasoningFormat::kMistral;
  if (contains(source, "<think>") || contains(source, "</think>")) return ReasoningFormat::kThinkTags;
  return ReasoningFormat::kNone;
}

bool prompt_opens_reasoning(std::string_view prompt, ReasoningFormat format) {
  std::string_view end = trim_trailing_spaces(prompt);
  if (format == ReasoningFormat::kHarmony) return end.ends_with(kHarmonyAnalysisOpen);
  TagPair tags = tags_of(format);
  return !tags.open.empty() && end.ends_with(tags.open);
}

ReasoningParser::ReasoningParser(ReasoningFormat format, bool starts_in_reasoning)
    : format_(format), open_(tags_of(format).open), close_(tags_of(format).close) {
  if (format == ReasoningFormat::kNone) {
    state_ = State::kContent;
  } else if (format == ReasoningFormat::kHarmony) {
    state_ = starts_in_reasoning ? State::kBody : State::kHeader;
    body_kind_ = BodyKind::kReasoning;
  } else {
    state_ = starts_in_reasoning ? State::kReasoningStart : State::kStart;
  }
}

void ReasoningParser::feed(std::string_view piece, std::vector<OutputEvent>& events) {
  CORVID_CHECK(!finished_, "reasoning parser: feed after finish");
  pending_ += piece;
  process(false, events);
}

void ReasoningParser::finish(std::vector<OutputEvent>& events) {
  if (finished_) return;
  process(true, events);
  finished_ = true;
}

void ReasoningParser::process(bool at_end, std::vector<OutputEvent>& events) {
  if (format_ == ReasoningFormat::kHarmony) {
    while (step_harmony(at_end, events)) {}
  } else {
    while (step_tags(at_end, events)) {}
  }
}

void ReasoningParser::emit(OutputEvent::Kind kind, std::string_view text, std::vector<OutputEvent>& events) {
  if (text.empty()) return;
  (kind == OutputEvent::Kind::kReasoning ? reasoning_ : content_) += text;
  events.push_back({kind, std::string(text), 0, {}, {}});
}

// One decision of the tag state machine; false when it must wait for more text.
bool ReasoningParser::step_tags(bool at_end, std::vector<OutputEvent>& events) {
  switch (state_) {
    case State::kStart: {
      // Reasoning is recognized only where the output starts (after whitespace): a
      // "<think>" later in an answer is the answer's text.
      std::string_view rest = trim_leading_spaces(pending_);
      if (rest.starts_with(open_)) {
        pending_.erase(0, pending_.size() - rest.size() + open_.size());
        state_ = State::kReasoningStart;
        return true;
      }
      if (is_marker_prefix(rest, open_) && !at_end) return false;
      state_ = State::kContent;
      return true;
    }
    case State::kReasoningStart:
    case State::kAfterReasoning: {
      std::size_t spaces = pending_.size() - trim_leading_spaces(pending_).size();
      pending_.erase(0, spaces);
      if (pending_.empty()) return false;
      if (state_ == State::kReasoningStart) {
        // Some models write the open marker again although the prompt already opened
        // reasoning; it is no part of the reasoning.
        if (pending_.starts_with(open_)) {
          pending_.erase(0, open_.size());
          return true;
        }
        if (is_marker_prefix(pending_, open_) && !at_end) return false;
      }
      state_ = state_ == State::kReasoningStart ? State::kReasoning : State::kContent;
      return true;
    }
    case State::kReasoning: {
      std::size_t close = pending_.find(close_);
      if (close != std::string::npos) {
        emit(OutputEvent::Kind::kReasoning, trim_trailing_spaces(std::string_view(pending_).substr(0, close)), events);
        pending_.erase(0, close + close_.size());
        state_ = State::kAfterReasoning;
        return true;
      }
      // Hold a possible partial close marker and the whitespace before it, which is
      // dropped if the marker follows.
      std::size_t keep_from = at_end ? pending_.size() : pending_.size() - partial_marker_suffix(pending_, std::array{close_});
      while (keep_from > 0 && is_space(pending_[keep_from - 1])) --keep_from;
      emit(OutputEvent::Kind::kReasoning, std::string_view(pending_).substr(0, keep_from), events);
      pending_.erase(0, at_end ? pending_.size() : keep_from);
      return false;
    }
    case State::kContent:
      emit(OutputEvent::Kind::kContent, pending_, events);
      pending_.clear();
      return false;
    case State::kHeader:
    case State::kBody:
      break;
  }
  return false;
}

// One decision of the harmony state machine; false when it must wait for more text.
bool ReasoningParser::step_harmony(bool at_end, std::vector<OutputEvent>& events) {
  if (pending_.empty()) return false;
  if (state_ == State::kHeader) {
    bool header_like = false;
    for (std::string_view start : kHarmonyHeaderStarts)
      header_like = header_like || pending_.starts_with(start) || is_marker_prefix(pending_, start);
    std::size_t message = pending_.find(kHarmonyMessage);
    // Where <|message|> starts, or the earliest it still can (a partial one may end the text).
    std::size_t header_length = message != std::string::npos
                                    ? message
                                    : pending_.size() - partial_marker_suffix(pending_, std::array{kHarmonyMessage});
    if (!header_like || header_length > kHarmonyMaxHeader) {
      // Not a harmony message: the text is the answer as written.
      state_ = State::kBody;
      body_kind_ = BodyKind::kContent;
      return true;
    }
    if (message == std::string::npos) {
      if (!at_end) return false;
      emit(OutputEvent::Kind::kContent, pending_, events);
      pending_.clear();
      return false;
    }
    start_harmony_body(std::string_view(pending_).substr(0, message), events);
    pending_.erase(0, message + kHarmonyMessage.size());
    state_ = State::kBody;
    return true;
  }
  OutputEvent::Kind kind = body_kind_ == BodyKind::kReasoning ? OutputEvent::Kind::kReasoning : OutputEvent::Kind::kContent;
  if (std::optional<MarkerHit> end = find_first_marker(pending_, kHarmonyBodyEnds)) {
    emit(kind, std::string_view(pending_).substr(0, end->pos), events);
    if (body_kind_ == BodyKind::kToolCall) emit(OutputEvent::Kind::kContent, "<|call|>", events);
    pending_.erase(0, end->pos + kHarmonyBodyEnds[end->marker].size());
    state_ = State::kHeader;
    return true;
  }
  std::size_t keep = at_end ? 0 : partial_marker_suffix(pending_, kHarmonyBodyEnds);
  emit(kind, std::string_view(pending_).substr(0, pending_.size() - keep), events);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

// Analysis messages are reasoning, final (and preamble commentary) messages the answer.
// A message to a function is handed to the tool-call parser in one canonical shape,
// "<|channel|>commentary to=functions.f<|message|>{...}<|call|>", whichever of the
// header orders the model used.
void ReasoningParser::start_harmony_body(std::string_view header, std::vector<OutputEvent>& events) {
  std::string_view recipient = header_word(header, "to=");
  if (recipient.starts_with("functions.")) {
    body_kind_ = BodyKind::kToolCall;
    emit(OutputEvent::Kind::kContent, std::string(kHarmonyChannel) + "commentary to=" + std::string(recipient) + std::string(kHarmonyMessage), events);
  } else if (header_word(header, kHarmonyChannel) == "analysis") {
    body_kind_ = BodyKind::kReasoning;
    // Several analysis messages (e.g. between tool calls) read as paragraphs.
    if (!reasoning_.empty()) emit(OutputEvent::Kind::kReasoning, "\n\n", events);
  } else {
    body_kind_ = BodyKind::kContent;
  }
}

}  // namespace corvid::chat
