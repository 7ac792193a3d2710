// ChatTemplate: transformers' apply_chat_template(tokenize=False) around the Jinja
// interpreter. The steps and messages follow transformers 5.x
// (tokenization_utils_base.apply_chat_template / get_chat_template and
// chat_template_utils.render_jinja_template); tests/fixtures/templates pins them.
#include "corvid/chat/chat_template.h"

#include <array>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "corvid/core/error.h"

namespace corvid {

using jinja::Json;

struct ChatTemplate::Named {
  std::string source;
  std::optional<jinja::Template> parsed;
  std::exception_ptr parse_error;  // rethrown when this template is used, as jinja2 compiles lazily
};

namespace {

// transformers appends this to the text to continue, finds it in the output and cuts there.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";
constexpr std::array<const char*, 3> kReasoningFields = {"reasoning_content", "thinking", "reasoning"};

// strftime_now's clock: the date a render pinned (per thread, as renders may run in
// parallel), else the local time as Python's datetime.now().
thread_local const std::tm* t_pinned_now = nullptr;

std::tm clock_now() {
  if (t_pinned_now) return *t_pinned_now;
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

class PinNow {
 public:
  explicit PinNow(const std::optional<std::tm>& now) : previous_(t_pinned_now) {
    if (now) t_pinned_now = &*now;
  }
  ~PinNow() { t_pinned_now = previous_; }
  PinNow(const PinNow&) = delete;
  PinNow& operator=(const PinNow&) = delete;

 private:
  const std::tm* previous_;
};

std::shared_ptr<const ChatTemplate::Named> parse_named(std::string source) {
  auto named = std::make_shared<ChatTemplate::Named>();
  named->source = std::move(source);
  jinja::Options options;
  options.now = clock_now;
  try {
    named->parsed.emplace(jinja::Template::parse(named->source, options));
  } catch (const Error&) {
    named->parse_error = std::current_exception();
  }
  return named;
}

// Decodes one UTF-8 code point at s[i] (invalid bytes count as one unit, never whitespace).
char32_t code_point_at(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    len = 1;
    return 0xFFFD;
  }
  char32_t cp = n == 1 ? b : (b & (0x7F >> n));
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  len = static_cast<size_t>(n);
  return cp;
}

// Python's str.isspace().
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.rstrip() / str.strip() on UTF-8 text.
std::string_view py_rstrip(std::string_view s) {
  size_t end = 0;  // one past the last non-space code point
  for (size_t i = 0, len = 0; i < s.size(); i += len)
    if (!py_space(code_point_at(s, i, len))) end = i + len;
  return s.substr(0, end);
}

std::string_view py_strip(std::string_view s) {
  s = py_rstrip(s);
  size_t i = 0, len = 0;
  while (i < s.size() && py_space(code_point_at(s, i, len))) i += len;
  return s.substr(i);
}

// Python's repr of a list of names: ['a', 'b'].
std::string py_list_repr(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

// apply_chat_template's normalization: message objects only, None-valued keys dropped.
Json normalize_messages(const Json& messages) {
  CORVID_CHECK(messages.is_array(), "chat messages must be a JSON array of message objects");
  CORVID_CHECK(!messages.empty(), "Cannot apply chat template to an empty conversation. Provide at least one message.");
  CORVID_CHECK(!messages[0].is_array(), "batched conversations (a list of lists of messages) are not supported");
  Json out = Json::array();
  for (const Json& message : messages) {
    CORVID_CHECK(message.is_object(),
                 "Chat messages should be dicts, dataclasses or pydantic models, but got ", message.dump(), ".");
    Json kept = Json::object();
    for (const auto& [key, value] : message.items())
      if (!value.is_null()) kept[key] = value;
    out.push_back(std::move(kept));
  }
  return out;
}

// transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}
// where r is the first non-None of reasoning_content, thinking, reasoning.
void alias_reasoning_fields(Json& messages) {
  for (Json& message : messages) {
    const Json* reasoning = nullptr;
    for (const char* field : kReasoningFields)
      if (message.contains(field) && !message[field].is_null()) {
        reasoning = &message[field];
        break;
      }
    if (!reasoning) continue;
    const Json value = *reasoning;
    Json aliased = Json::object();
    aliased["thinking"] = value;
    for (const auto& [key, item] : message.items()) aliased[key] = item;
    aliased["reasoning_content"] = value;
    message = std::move(aliased);
  }
}

std::string appended_tag(const Json& text, const std::string& field) {
  CORVID_CHECK(text.is_string(), "continue_final_message: the final message's \"", field, "\" is not a string");
  return text.get<std::string>() + std::string(kContinueTag);
}

// Marks the text to continue (render_jinja_template's tagging); returns that text.
std::string tag_final_message(Json& chat, const std::string& field, const std::string& source) {
  Json& last = chat.back();
  if (!last.contains(field) || last[field].is_null())
    fail("continue_final_message is set but the final message has no \"", field, "\" to continue!");
  Json final_message = last[field];
  std::vector<std::string> fields = {field};
  bool is_reasoning = false;
  for (const char* r : kReasoningFields) is_reasoning = is_reasoning || field == r;
  if (is_reasoning) {
    fields.clear();
    for (const char* r : kReasoningFields)
      if (last.contains(r) && last[r] == final_message) fields.emplace_back(r);
  }
  bool accepted = false;
  for (const std::string& f : fields) accepted = accepted || source.find(f) != std::string::npos;
  if (!accepted)
    fail("continue_final_message is set to \"", field, "\" but this is not an accepted field in the chat_template");
  if (final_message.is_array()) {
    for (auto it = last[field].rbegin(); it != last[field].rend(); ++it) {
      if (it->is_object() && it->contains("text")) {
        std::string text = (*it)["text"].is_string() ? (*it)["text"].get<std::string>() : std::string();
        (*it)["text"] = appended_tag((*it)["text"], "text");
        return text;
      }
    }
    fail("continue_final_message is set but we could not find any text to continue in the final message!");
  }
  for (const std::string& f : fields) last[f] = appended_tag(last[f], f);
  return final_message.get<std::string>();
}

// Cuts the render at the tag (render_jinja_template's trimming).
std::string trim_at_tag(const std::string& rendered, const std::string& final_text) {
  const std::string_view final_stripped = py_strip(final_text);
  const std::string_view tag = py_strip(kContinueTag);
  if (rendered.find(final_stripped) == std::string::npos || rendered.find(tag) == std::string::npos)
    fail("continue_final_message is set but the final message does not appear in the chat after applying the chat "
         "template! This can happen if the chat template deletes portions of the final message. Please verify the "
         "chat template and final message in your chat to ensure they are compatible.Final message to continue: ",
         final_stripped, "\nRendered chat:\n", rendered);
  const size_t at = rendered.rfind(tag);
  if (rendered.compare(at, kContinueTag.size(), kContinueTag) == 0) return rendered.substr(0, at);
  return std::string(py_rstrip(std::string_view(rendered).substr(0, at)));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, Json special_tokens)
    : special_tokens_(std::move(special_tokens)) {
  templates_.emplace("", parse_named(std::string(source)));
}

ChatTemplate::ChatTemplate(const std::map<std::string, std::string>& named_sources, Json special_tokens)
    : special_tokens_(std::move(special_tokens)) {
  CORVID_CHECK(!named_sources.empty(), "no chat template");
  if (named_sources.size() == 1 && named_sources.count("default")) {
    templates_.emplace("", parse_named(named_sources.at("default")));
    return;
  }
  for (const auto& [name, source] : named_sources) {
    CORVID_CHECK(!name.empty(), "a chat template has an empty name");
    templates_.emplace(name, parse_named(source));
  }
}

// transformers' get_chat_template.
const ChatTemplate::Named& ChatTemplate::select(const ChatRequest& request) const {
  if (auto single = templates_.find(""); single != templates_.end()) {
    CORVID_CHECK(request.template_name.empty() || request.template_name == "default",
                 "the model has a single chat template; there is no template named '", request.template_name, "'");
    return *single->second;
  }
  if (!request.template_name.empty()) {
    auto it = templates_.find(request.template_name);
    CORVID_CHECK(it != templates_.end(), "no chat template named '", request.template_name, "'");
    return *it->second;
  }
  if (!request.tools.is_null() && templates_.count("tool_use")) return *templates_.at("tool_use");
  if (templates_.count("default")) return *templates_.at("default");
  std::vector<std::string> names;
  for (const auto& entry : templates_) names.push_back(entry.first);
  fail("This model has multiple chat templates with no default specified! Please either pass a chat template or the "
       "name of the template you wish to use to the `chat_template` argument. Available template names are ",
       py_list_repr(names), ".");
}

const std::string& ChatTemplate::source(const ChatRequest& request) const { return select(request).source; }

std::string ChatTemplate::render(const ChatRequest& request) const {
  const Named& named = select(request);
  Json chat = normalize_messages(request.messages);
  const bool continuing = !request.continue_final_message.empty();
  if (continuing && request.add_generation_prompt)
    fail("continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you "
         "want the model to continue the final message, and add_generation_prompt when you want to add a header "
         "that will prompt it to start a new assistant message instead.");
  CORVID_CHECK(request.kwargs.is_object(), "template kwargs must be a JSON object");
  if (named.parse_error) std::rethrow_exception(named.parse_error);  // jinja2 compiles here
  CORVID_CHECK(request.tools.is_null() || request.tools.is_array(), "tools must be a JSON array of tool schemas");
  for (const Json& t : request.tools.is_array() ? request.tools : Json::array())
    CORVID_CHECK(t.is_object(),
                 "Tools should either be a JSON schema, or a callable function with type hints and a docstring "
                 "suitable for auto-conversion to a schema.");

  Json context = special_tokens_.is_object() ? special_tokens_ : Json::object();
  Json documents;
  for (const auto& [key, value] : request.kwargs.items()) {
    if (key == "documents") {
      for (const Json& d : value.is_array() ? value : Json::array())
        CORVID_CHECK(d.is_object(), "Documents should be a list of dicts with 'title' and 'text' keys!");
      documents = value;
      continue;
    }
    CORVID_CHECK(key != "messages" && key != "tools" && key != "add_generation_prompt",
                 "template kwargs cannot set '", key, "' (it is an argument of the chat template call)");
    context[key] = value;
  }

  alias_reasoning_fields(chat);
  std::string final_text;
  if (continuing) final_text = tag_final_message(chat, request.continue_final_message, named.source);

  context["messages"] = std::move(chat);
  context["tools"] = request.tools;
  context["documents"] = documents;
  context["add_generation_prompt"] = request.add_generation_prompt;
  std::string rendered;
  {
    PinNow pin(request.now);
    rendered = named.parsed->render(context);
  }
  if (continuing) rendered = trim_at_tag(rendered, final_text);
  return rendered;
}

std::tm ChatTemplate::parse_date(const std::string& s) {
  int y = 0, m = 0, d = 0;
  char tail = 0;
  CORVID_CHECK(std::sscanf(s.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) == 3 && s.size() == 10,
               "date '", s, "': expected YYYY-MM-DD");
  CORVID_CHECK(y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= 31, "date '", s, "' is out of range");
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = m - 1;
  tm.tm_mday = d;
  const std::time_t t = timegm(&tm);  // normalizes and fills weekday and day of year
  std::tm out{};
  gmtime_r(&t, &out);
  CORVID_CHECK(out.tm_mday == d && out.tm_mon == m - 1, "date '", s, "' does not exist");
  return out;
}

}  // namespace corvid
