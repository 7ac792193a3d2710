#include "corvid/speech/transcript_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "corvid/core/ascii.h"

namespace corvid {

namespace {

// Whisper's languages in its token order (openai-whisper's LANGUAGES).
constexpr std::pair<const char*, const char*> kLanguages[] = {
    {"en", "english"},    {"zh", "chinese"},    {"de", "german"},        {"es", "spanish"},   {"ru", "russian"},
    {"ko", "korean"},     {"fr", "french"},     {"ja", "japanese"},      {"pt", "portuguese"}, {"tr", "turkish"},
    {"pl", "polish"},     {"ca", "catalan"},    {"nl", "dutch"},         {"ar", "arabic"},    {"sv", "swedish"},
    {"it", "italian"},    {"id", "indonesian"}, {"hi", "hindi"},         {"fi", "finnish"},   {"vi", "vietnamese"},
    {"he", "hebrew"},     {"uk", "ukrainian"},  {"el", "greek"},         {"ms", "malay"},     {"cs", "czech"},
    {"ro", "romanian"},   {"da", "danish"},     {"hu", "hungarian"},     {"ta", "tamil"},     {"no", "norwegian"},
    {"th", "thai"},       {"ur", "urdu"},       {"hr", "croatian"},      {"bg", "bulgarian"}, {"lt", "lithuanian"},
    {"la", "latin"},      {"mi", "maori"},      {"ml", "malayalam"},     {"cy", "welsh"},     {"sk", "slovak"},
    {"te", "telugu"},     {"fa", "persian"},    {"lv", "latvian"},       {"bn", "bengali"},   {"sr", "serbian"},
    {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"},       {"et", "estonian"},  {"mk", "macedonian"},
    {"br", "breton"},     {"eu", "basque"},     {"is", "icelandic"},     {"hy", "armenian"},  {"ne", "nepali"},
    {"mn", "mongolian"},  {"bs", "bosnian"},    {"kk", "kazakh"},        {"sq", "albanian"},  {"sw", "swahili"},
    {"gl", "galician"},   {"mr", "marathi"},    {"pa", "punjabi"},       {"si", "sinhala"},   {"km", "khmer"},
    {"sn", "shona"},      {"yo", "yoruba"},     {"so", "somali"},        {"af", "afrikaans"}, {"oc", "occitan"},
    {"ka", "georgian"},   {"be", "belarusian"}, {"tg", "tajik"},         {"sd", "sindhi"},    {"gu", "gujarati"},
    {"am", "amharic"},    {"yi", "yiddish"},    {"lo", "lao"},           {"uz", "uzbek"},     {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"},       {"nn", "nynorsk"},   {"mt", "maltese"},
    {"sa", "sanskrit"},   {"lb", "luxembourgish"}, {"my", "myanmar"},    {"bo", "tibetan"},   {"tl", "tagalog"},
    {"mg", "malagasy"},   {"as", "assamese"},   {"tt", "tatar"},         {"haw", "hawaiian"}, {"ln", "lingala"},
    {"ha", "hausa"},      {"ba", "bashkir"},    {"jw", "javanese"},      {"su", "sundanese"}, {"yue", "cantonese"},
};


}  // namespace

std::optional<std::string> whisper_language_code(const std::string& code_or_name) {
  const std::string k = ascii_lower(ascii_trim(code_or_name));
  for (const auto& [code, name] : kLanguages)
    if (k == code || k == name) return std::string(code);
  return std::nullopt;
}

std::string whisper_language_name(const std::string& code) {
  for (const auto& [c, name] : kLanguages)
    if (code == c) return name;
  return code;
}

std::optional<TranscriptFormat> transcript_format_named(const std::string& name) {
  if (name == "text") return TranscriptFormat::Text;
  if (name == "json") return TranscriptFormat::Json;
  if (name == "verbose_json") return TranscriptFormat::VerboseJson;
  if (name == "srt") return TranscriptFormat::Srt;
  if (name == "vtt") return TranscriptFormat::Vtt;
  return std::nullopt;
}

std::string subtitle_time(double seconds, char decimal) {
  const long long ms = std::llround(std::max(0.0, seconds) * 1000.0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, decimal,
                ms % 1000);
  return buf;
}

nlohmann::json segment_json(const TranscriptSegment& s) {
  nlohmann::json j = segment_fields(s);
  if (!s.words.empty()) {
    nlohmann::json words = nlohmann::json::array();
    for (const TimedWord& w : s.words)
      words.push_back({{"word", w.word}, {"start", w.start}, {"end", w.end}, {"probability", w.probability}});
    j["words"] = std::move(words);
  }
  return j;
}

nlohmann::json segment_fields(const TranscriptSegment& s) {
  return {{"id", s.id},
          {"seek", s.seek},
          {"start", s.start},
          {"end", s.end},
          {"text", s.text},
          {"tokens", s.tokens},
          {"temperature", s.temperature},
          {"avg_logprob", s.avg_logprob},
          {"compression_ratio", s.compression_ratio},
          {"no_speech_prob", s.no_speech_prob}};
}

nlohmann::json words_json(const Transcript& t) {
  nlohmann::json words = nlohmann::json::array();
  for (const TranscriptSegment& s : t.segments)
    for (const TimedWord& w : s.words) words.push_back({{"word", ascii_trim(w.word)}, {"start", w.start}, {"end", w.end}});
  return words;
}

nlohmann::json verbose_json(const Transcript& t, const std::string& task, bool segments, bool words) {
  nlohmann::json j = {{"task", task},
                      {"language", whisper_language_name(t.language)},
                      {"duration", t.duration},
                      {"text", t.text()}};
  if (segments) {
    nlohmann::json all = nlohmann::json::array();
    for (const TranscriptSegment& s : t.segments) all.push_back(words ? segment_json(s) : segment_fields(s));
    j["segments"] = std::move(all);
  }
  if (words) j["words"] = words_json(t);
  return j;
}

std::string format_transcript(const Transcript& t, TranscriptFormat format, const std::string& task) {
  switch (format) {
    case TranscriptFormat::Text: return t.text() + "\n";
    case TranscriptFormat::Json: return nlohmann::json{{"text", t.text()}}.dump();
    case TranscriptFormat::VerboseJson: {
      const bool words = std::any_of(t.segments.begin(), t.segments.end(),
                                     [](const TranscriptSegment& s) { return !s.words.empty(); });
      return verbose_json(t, task, true, words).dump();
    }
    case TranscriptFormat::Srt: {
      std::string out;
      int n = 0;
      for (const TranscriptSegment& s : t.segments)
        out += std::to_string(++n) + "\n" + subtitle_time(s.start, ',') + " --> " + subtitle_time(s.end, ',') + "\n" +
               ascii_trim(s.text) + "\n\n";
      return out;
    }
    case TranscriptFormat::Vtt: {
      std::string out = "WEBVTT\n\n";
      for (const TranscriptSegment& s : t.segments)
        out += subtitle_time(s.start, '.') + " --> " + subtitle_time(s.end, '.') + "\n" + ascii_trim(s.text) + "\n\n";
      return out;
    }
  }
  return "";
}

}  // namespace corvid
