// Gemma 4 tool calls: <|tool_call>call:f{key:value,...}<tool_call|>.
//
// The template writes arguments in its own notation (format_argument): strings between
// <|"|> quotes, keys bare, numbers and true/false as is, nested {...} and [...]. After
// its calls the model emits <|tool_response>, asking for the results; that marker is
// dropped. Bare scalars that are not numbers, booleans or null are kept as strings.
#include <array>

#include "corvid/chat/tool_formats.h"

namespace corvid::chat {
namespace {

constexpr std::string_view kQuote = "<|\"|>";
constexpr int kMaxDepth = 64;  // nesting bound: malformed input must not exhaust the stack

class GemmaValueReader {
 public:
  explicit GemmaValueReader(std::string_view text) : text_(text) {}

  std::optional<nlohmann::ordered_json> object_then_end() {
    skip_spaces();
    if (!peek('{')) return std::nullopt;
    std::optional<nlohmann::ordered_json> value = read_value(0);
    skip_spaces();
    if (!value || pos_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  std::optional<nlohmann::ordered_json> read_value(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_spaces();
    if (rest().starts_with(kQuote)) {
      std::optional<std::string> text = read_quoted();
      if (!text) return std::nullopt;
      return nlohmann::ordered_json(std::move(*text));
    }
    if (peek('{')) return read_object(depth);
    if (peek('[')) return read_array(depth);
    return read_scalar();
  }

  std::optional<nlohmann::ordered_json> read_object(int depth) {
    ++pos_;  // '{'
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    skip_spaces();
    if (peek('}')) {
      ++pos_;
      return object;
    }
    while (true) {
      skip_spaces();
      std::string key;
      if (rest().starts_with(kQuote)) {
        std::optional<std::string> quoted = read_quoted();
        if (!quoted) return std::nullopt;
        key = std::move(*quoted);
      } else {
        std::size_t colon = text_.find(':', pos_);
        if (colon == std::string_view::npos) return std::nullopt;
        key = std::string(trim_spaces(text_.substr(pos_, colon - pos_)));
        if (key.empty() || key.find_first_of("{}[],") != std::string::npos) return std::nullopt;
        pos_ = colon;
      }
      skip_spaces();
      if (!peek(':')) return std::nullopt;
      ++pos_;
      std::optional<nlohmann::ordered_json> value = read_value(depth + 1);
      if (!value) return std::nullopt;
      object[key] = std::move(*value);
      skip_spaces();
      if (peek(',')) {
        ++pos_;
        continue;
      }
      if (peek('}')) {
        ++pos_;
        return object;
      }
      return std::nullopt;
    }
  }

  std::optional<nlohmann::ordered_json> read_array(int depth) {
    ++pos_;  // '['
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    skip_spaces();
    if (peek(']')) {
      ++pos_;
      return array;
    }
    while (true) {
      std::optional<nlohmann::ordered_json> value = read_value(depth + 1);
      if (!value) return std::nullopt;
      array.push_back(std::move(*value));
      skip_spaces();
      if (peek(',')) {
        ++pos_;
        continue;
      }
      if (peek(']')) {
        ++pos_;
        return array;
      }
      return std::nullopt;
    }
  }

  // Numbers, true/false, null (and Python's None/True/False, which the template would
  // print for such values); other bare words become strings.
  std::optional<nlohmann::ordered_json> read_scalar() {
    std::size_t end = text_.find_first_of(",}]", pos_);
    if (end == std::string_view::npos) end = text_.size();
    std::string_view token = trim_spaces(text_.substr(pos_, end - pos_));
    if (token.empty()) return std::nullopt;
    pos_ = end;
    if (token == "true" || token == "True") return nlohmann::ordered_json(true);
    if (token == "false" || token == "False") return nlohmann::ordered_json(false);
    if (token == "null" || token == "None") return nlohmann::ordered_json(nullptr);
    if (std::optional<nlohmann::ordered_json> number = try_parse_json(token); number && number->is_number())
      return number;
    return nlohmann::ordered_json(std::string(token));
  }

  std::optional<std::string> read_quoted() {
    std::size_t begin = pos_ + kQuote.size();
    std::size_t end = text_.find(kQuote, begin);
    if (end == std::string_view::npos) return std::nullopt;
    pos_ = end + kQuote.size();
    return std::string(text_.substr(begin, end - begin));
  }

  std::string_view rest() const { return text_.substr(pos_); }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void skip_spaces() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

class Gemma4Syntax final : public ToolCallSyntax {
 public:
  RegionStart find_start(std::string_view text, bool) const override {
    return find_marker_start(text, kMarkers);
  }

  RegionScan scan(std::string_view text, bool at_end) const override {
    if (text.starts_with(kToolResponse))
      return {true, kToolResponse.size(), std::vector<ParsedCall>{}};
    std::string_view after_open = text.substr(kOpen.size());
    if (!after_open.starts_with(kCall) && !is_marker_prefix(after_open, kCall)) return {true, kOpen.size(), std::nullopt};
    std::optional<std::size_t> close = find_close(text);
    if (!close) return at_end ? RegionScan{true, text.size(), std::nullopt} : RegionScan{};
    std::size_t length = *close + kClose.size();
    std::optional<ParsedCall> call = parse_call(text.substr(kOpen.size(), *close - kOpen.size()));
    if (!call) return {true, length, std::nullopt};
    return {true, length, std::vector<ParsedCall>{std::move(*call)}};
  }

 private:
  // The close marker outside <|"|> strings, which may hold any text.
  static std::optional<std::size_t> find_close(std::string_view text) {
    std::size_t pos = kOpen.size();
    while (true) {
      std::size_t close = text.find(kClose, pos);
      std::size_t quote = text.find(kQuote, pos);
      if (close == std::string_view::npos) return std::nullopt;
      if (quote == std::string_view::npos || close < quote) return close;
      std::size_t quote_end = text.find(kQuote, quote + kQuote.size());
      if (quote_end == std::string_view::npos) return std::nullopt;
      pos = quote_end + kQuote.size();
    }
  }

  // "call:f{...}"
  static std::optional<ParsedCall> parse_call(std::string_view body) {
    if (!body.starts_with(kCall)) return std::nullopt;
    body.remove_prefix(kCall.size());
    std::size_t brace = body.find('{');
    if (brace == std::string_view::npos) return std::nullopt;
    std::string_view name = trim_spaces(body.substr(0, brace));
    if (name.empty() || name.find_first_of(" \n\t<>:,") != std::string_view::npos) return std::nullopt;
    std::optional<nlohmann::ordered_json> args = GemmaValueReader(body.substr(brace)).object_then_end();
    if (!args) return std::nullopt;
    return ParsedCall{std::string(name), std::move(*args)};
  }

  static constexpr std::string_view kOpen = "<|tool_call>";
  static constexpr std::string_view kClose = "<tool_call|>";
  static constexpr std::string_view kCall = "call:";
  static constexpr std::string_view kToolResponse = "<|tool_response>";
  static constexpr std::array<std::string_view, 2> kMarkers{kOpen, kToolResponse};
};

}  // namespace

std::unique_ptr<ToolCallSyntax> make_gemma4_syntax() { return std::make_unique<Gemma4Syntax>(); }

}  // namespace corvid::chat
