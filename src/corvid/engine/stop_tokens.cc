#include "corvid/engine/stop_tokens.h"

#include <algorithm>
#include <exception>
#include <string>
#include <string_view>

#include "corvid/chat/chat_template.h"

namespace corvid {

std::optional<int32_t> end_of_turn_id(const ChatTemplate& chat_template, const Tokenizer& tokenizer) {
  constexpr std::string_view kProbe = "corvid-end-of-turn-probe";
  ChatRequest request;
  request.messages = jinja::Json::array({{{"role", "user"}, {"content", "Hi"}},
                                         {{"role", "assistant"}, {"content", std::string(kProbe)}}});
  std::string text;
  try {
    text = chat_template.render(request);
  } catch (const std::exception&) {
    return std::nullopt;  // a template may insist on more (a system message, tools): no marker to learn
  }
  const std::size_t at = text.rfind(kProbe);
  if (at == std::string::npos) return std::nullopt;
  const std::vector<int32_t> after = tokenizer.encode(std::string_view(text).substr(at + kProbe.size()), false);
  if (after.empty() || !tokenizer.is_special(after.front())) return std::nullopt;
  return after.front();
}

std::vector<int32_t> stop_token_ids(const Tokenizer* tokenizer, const ModelConfig& config,
                                    const GenerationConfig* generation, const ChatTemplate* chat_template) {
  std::vector<int64_t> ids(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (generation) ids.insert(ids.end(), generation->eos_token_ids.begin(), generation->eos_token_ids.end());
  if (tokenizer) {
    for (int32_t id : tokenizer->eos_ids()) ids.push_back(id);
    if (std::optional<int32_t> end_of_text = tokenizer->token_to_id("<|endoftext|>"))
      if (tokenizer->is_special(*end_of_text)) ids.push_back(*end_of_text);
    if (chat_template)
      if (std::optional<int32_t> end_of_turn = end_of_turn_id(*chat_template, *tokenizer)) ids.push_back(*end_of_turn);
  }
  std::vector<int32_t> stops;
  for (int64_t id : ids)
    if (id >= 0 && id < config.vocab_size) stops.push_back(static_cast<int32_t>(id));
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  return stops;
}

}  // namespace corvid
