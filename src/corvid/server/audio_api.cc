#include "corvid/server/audio_api.h"

#include <array>
#include <charconv>
#include <cmath>
#include <sstream>

#include "corvid/core/ascii.h"

namespace corvid::server {

namespace {

constexpr std::array<const char*, 9> kFields = {"file",        "model",  "language",
                                                "prompt",      "stream", "response_format",
                                                "temperature", "timestamp_granularities[]",
                                                "timestamp_granularities"};

// A field that may be given once: nullptr when absent or empty (form clients send
// unset fields as empty strings).
const MultipartPart* single(const MultipartForm& form, const char* name) {
  const std::vector<const MultipartPart*> parts = form.all(name);
  if (parts.size() > 1) bad(name, std::string("'") + name + "' is given " + std::to_string(parts.size()) + " times");
  if (parts.empty() || (parts[0]->body.empty() && !parts[0]->has_filename)) return nullptr;
  return parts[0];
}

bool form_boolean(const MultipartPart& p) {
  const std::string v = ascii_lower(p.body);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  bad(p.name, "'" + p.name + "' must be true or false, not '" + std::string(p.body) + "'");
}

double form_number(const MultipartPart& p, double lo, double hi) {
  double x = 0;
  const char* end = p.body.data() + p.body.size();
  const auto [ptr, ec] = std::from_chars(p.body.data(), end, x);
  if (ec != std::errc() || ptr != end || !std::isfinite(x))
    bad(p.name, "'" + p.name + "' must be a number, not '" + std::string(p.body) + "'");
  if (x < lo || x > hi) {
    std::ostringstream m;
    m << "'" << p.name << "' must be in [" << lo << ", " << hi << "], got " << x;
    bad(p.name, m.str());
  }
  return x;
}

const char* format_name(TranscriptFormat f) {
  switch (f) {
    case TranscriptFormat::Text: return "text";
    case TranscriptFormat::Json: return "json";
    case TranscriptFormat::VerboseJson: return "verbose_json";
    case TranscriptFormat::Srt: return "srt";
    case TranscriptFormat::Vtt: return "vtt";
  }
  return "?";
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

AudioRequest parse_audio_request(const MultipartForm& form, std::string_view path, bool multilingual) {
  const bool translate = path == kTranslationsPath;
  for (const MultipartPart& p : form.parts) {
    bool known = false;
    for (const char* k : kFields) known = known || p.name == k;
    if (!known) bad(p.name, "unknown field '" + p.name + "' (corvid does not support it)");
  }
  AudioRequest r;
  const MultipartPart* file = single(form, "file");
  if (!file) bad("file", "'file' is required: the audio to transcribe, as a file field of the form");
  r.file = file->body;
  r.filename = file->filename;
  if (const MultipartPart* model = single(form, "model")) r.model = std::string(model->body);

  if (translate) {
    // Whisper translates into English only, through the multilingual models' translate task.
    if (!multilingual) bad("model", "this speech model is English-only: it cannot translate (serve a multilingual one)");
    r.options.task = "translate";
  } else if (const MultipartPart* language = single(form, "language")) {
    const std::string given(language->body);
    const std::optional<std::string> code = whisper_language_code(given);
    if (!code) bad("language", "unknown language '" + given + "' (give an ISO-639-1 code such as 'en', or its name)");
    if (!multilingual && *code != "en")
      bad("language", "this speech model is English-only: it cannot transcribe language '" + given + "'");
    r.options.language = *code;
  }
  if (const MultipartPart* prompt = single(form, "prompt")) r.options.initial_prompt = std::string(prompt->body);
  if (const MultipartPart* format = single(form, "response_format")) {
    const std::optional<TranscriptFormat> f = transcript_format_named(std::string(format->body));
    if (!f)
      bad("response_format", "'response_format' must be json, text, srt, verbose_json or vtt, not '" +
                                 std::string(format->body) + "'");
    r.format = *f;
  }
  // OpenAI's rule: at 0 (the default) the decoder falls back to higher temperatures
  // when a window decodes badly; any other temperature is used alone.
  if (const MultipartPart* t = single(form, "temperature")) {
    const double temperature = form_number(*t, 0.0, 1.0);
    if (temperature > 0) r.options.temperatures = {static_cast<float>(temperature)};
  }
  bool granularities = false, segments = false;
  for (const char* name : {"timestamp_granularities[]", "timestamp_granularities"})
    for (const MultipartPart* g : form.all(name)) {
      if (g->body == "segment")
        segments = true;
      else if (g->body == "word")
        r.options.word_timestamps = true;
      else
        bad(name, std::string("'") + name + "' must be 'segment' or 'word', not '" + std::string(g->body) + "'");
      if (r.format != TranscriptFormat::VerboseJson)
        bad(name, std::string("'") + name + "' needs response_format verbose_json, not " + format_name(r.format));
      granularities = true;
    }
  r.segment_timestamps = !granularities || segments;
  if (const MultipartPart* stream = single(form, "stream")) r.stream = form_boolean(*stream);
  if (r.stream && r.format != TranscriptFormat::Json && r.format != TranscriptFormat::Text)
    bad("stream", std::string("streaming is for response_format json or text, not ") + format_name(r.format));
  return r;
}

AudioResponse audio_response(const Transcript& transcript, const AudioRequest& request) {
  // JSON for the wire: text cut inside a UTF-8 sequence (never expected) is replaced, not thrown on.
  auto wire = [](const auto& json) { return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  switch (request.format) {
    case TranscriptFormat::Json: return {wire(Json{{"text", transcript.text()}}), "application/json"};
    case TranscriptFormat::VerboseJson:
      return {wire(verbose_json(transcript, request.options.task, request.segment_timestamps,
                                request.options.word_timestamps)),
              "application/json"};
    default:
      return {format_transcript(transcript, request.format, request.options.task), "text/plain; charset=utf-8"};
  }
}

std::string TranscriptDeltas::next(const std::string& segment_text) {
  std::string text = held_ + segment_text;
  held_.clear();
  if (!started_) {
    size_t a = 0;
    while (a < text.size() && is_blank(text[a])) ++a;
    text.erase(0, a);
    if (text.empty()) return "";
    started_ = true;
  }
  size_t end = text.size();
  while (end > 0 && is_blank(text[end - 1])) --end;
  held_ = text.substr(end);
  text.resize(end);
  return text;
}

Json transcript_delta_event(const std::string& delta) {
  return Json{{"type", "transcript.text.delta"}, {"delta", delta}};
}

Json transcript_done_event(const std::string& text) { return Json{{"type", "transcript.text.done"}, {"text", text}}; }

}  // namespace corvid::server
