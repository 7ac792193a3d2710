#include "corvid/speech/whisper_vocab.h"

#include <algorithm>

#include "corvid/core/error.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

std::optional<int32_t> WhisperVocab::language_token(const std::string& code) const {
  for (const auto& [c, id] : languages)
    if (c == code) return id;
  return std::nullopt;
}

std::string WhisperVocab::language_of(int32_t token) const {
  for (const auto& [c, id] : languages)
    if (id == token) return c;
  return "";
}

namespace {

std::vector<int32_t> id_list(const nlohmann::json& j, const char* key, const std::string& source) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  CORVID_CHECK(it->is_array(), source, ": ", key, " must be a list of token ids");
  for (const auto& v : *it) {
    CORVID_CHECK(v.is_number_integer(), source, ": ", key, " must be a list of token ids");
    out.push_back(v.get<int32_t>());
  }
  return out;
}

}  // namespace

std::vector<int32_t> non_speech_tokens(const Tokenizer& tok) {
  std::vector<std::string> symbols;
  for (const char* s : {"\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_",
                        "`", "{", "|", "}", "~", "「", "」", "『", "』", "<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[",
                        "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪"})
    symbols.emplace_back(s);
  const std::vector<std::string> misc = {"♩", "♪", "♫", "♬", "♭", "♮", "♯"};  // kept even when split
  std::vector<int32_t> out;
  for (const char* s : {" -", " '"}) out.push_back(tok.encode(s, false).at(0));
  auto consider = [&](const std::string& symbol, bool always) {
    for (const std::string& text : {symbol, " " + symbol}) {
      const std::vector<int32_t> ids = tok.encode(text, false);
      if (!ids.empty() && (ids.size() == 1 || always)) out.push_back(ids[0]);
    }
  };
  for (const std::string& s : symbols) consider(s, false);
  for (const std::string& s : misc) consider(s, true);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

WhisperVocab whisper_vocab(const Tokenizer& tok, int64_t vocab_size, const nlohmann::json& extras,
                           const std::string& source) {
  auto id = [&](const char* name) -> std::optional<int32_t> { return tok.token_to_id(name); };
  auto need = [&](const char* name) {
    const auto v = id(name);
    CORVID_CHECK(v, source, ": the tokenizer has no ", name, " (not a Whisper tokenizer)");
    return *v;
  };
  WhisperVocab v;
  v.eot = need("<|endoftext|>");
  v.sot = need("<|startoftranscript|>");
  v.sot_prev = need("<|startofprev|>");
  v.no_timestamps = need("<|notimestamps|>");
  v.sot_lm = id("<|startoflm|>").value_or(-1);
  v.no_speech = id("<|nospeech|>").value_or(id("<|nocaptions|>").value_or(-1));
  v.transcribe = id("<|transcribe|>").value_or(-1);
  v.translate = id("<|translate|>").value_or(-1);
  v.timestamp_begin = v.no_timestamps + 1;
  v.timestamp_end = static_cast<int32_t>(vocab_size - 1);
  CORVID_CHECK(v.timestamp_begin < v.timestamp_end, source, ": no timestamp tokens after <|notimestamps|> (vocab ",
               vocab_size, ")");
  v.multilingual = vocab_size >= 51865;
  // Languages sit between <|startoftranscript|> and <|translate|>: <|en|>, <|zh|>, ...
  if (v.multilingual && v.translate > v.sot) {
    for (int32_t t = v.sot + 1; t < v.translate; ++t) {
      const std::string s = tok.id_to_token(t);
      if (s.size() > 4 && s.rfind("<|", 0) == 0 && s.substr(s.size() - 2) == "|>")
        v.languages.emplace_back(s.substr(2, s.size() - 4), t);
    }
  }
  if (extras.is_object()) {
    v.suppress = id_list(extras, extras.contains("suppress_ids") ? "suppress_ids" : "suppress_tokens", source);
    v.suppress_begin =
        id_list(extras, extras.contains("suppress_ids_begin") ? "suppress_ids_begin" : "begin_suppress_tokens", source);
    auto heads = extras.find("alignment_heads");
    if (heads != extras.end() && heads->is_array())
      for (const auto& h : *heads)
        if (h.is_array() && h.size() == 2 && h[0].is_number_integer() && h[1].is_number_integer())
          v.alignment_heads.emplace_back(h[0].get<int>(), h[1].get<int>());
  }
  if (!extras.is_object() || (!extras.contains("suppress_ids") && !extras.contains("suppress_tokens")))
    v.suppress = non_speech_tokens(tok);
  if (!extras.is_object() || (!extras.contains("suppress_ids_begin") && !extras.contains("begin_suppress_tokens")))
    v.suppress_begin = {tok.encode(" ", false).at(0), v.eot};
  for (int32_t t : v.suppress)
    CORVID_CHECK(t >= 0 && t < vocab_size, source, ": suppressed token ", t, " is outside the vocabulary");
  for (int32_t t : v.suppress_begin)
    CORVID_CHECK(t >= 0 && t < vocab_size, source, ": begin-suppressed token ", t, " is outside the vocabulary");
  return v;
}

}  // namespace corvid
