// A Transcript written out as the OpenAI audio API's response formats (and what
// `corvid transcribe --output-format` prints): text, json ({"text"}), verbose_json
// (language, duration, segments with their decoding statistics, words when timed), srt and vtt
// subtitles. Language codes and their English names (verbose_json's "language"
// is the name, as OpenAI's is).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "corvid/speech/transcriber.h"

namespace corvid {

enum class TranscriptFormat { Text, Json, VerboseJson, Srt, Vtt };

// nullopt for an unknown name.
std::optional<TranscriptFormat> transcript_format_named(const std::string& name);
// The body in `format`; `task` is "transcribe" or "translate".
std::string format_transcript(const Transcript& t, TranscriptFormat format, const std::string& task);
// `segments`: the "segments" list; `words`: the "words" list (OpenAI's: trimmed word,
// start, end) and each segment's own words (faster-whisper's: as decoded, with their
// probability).
nlohmann::json verbose_json(const Transcript& t, const std::string& task, bool segments = true, bool words = false);
// A segment's fields and, when it has them, its words.
nlohmann::json segment_json(const TranscriptSegment& s);
nlohmann::json segment_fields(const TranscriptSegment& s);  // without the words
nlohmann::json words_json(const Transcript& t);
// "00:01:02,345" (srt) or "00:01:02.345" (vtt).
std::string subtitle_time(double seconds, char decimal);

// Whisper's language code of a code or English name ("en", "English", "english" → "en");
// nullopt when Whisper knows no such language.
std::optional<std::string> whisper_language_code(const std::string& code_or_name);
// "english" for "en" (the code itself when unknown).
std::string whisper_language_name(const std::string& code);

}  // namespace corvid
