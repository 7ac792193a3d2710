// OpenAI's audio API on the wire: POST /v1/audio/transcriptions and
// /v1/audio/translations, multipart/form-data forms parsed into what the speech
// service runs, and its transcripts written back in the asked response_format (json,
// text, srt, verbose_json, vtt) or streamed as server-sent events (stream=true:
// transcript.text.delta per segment, then transcript.text.done, as OpenAI streams
// gpt-4o-transcribe). Fields: file (required), model, language (transcriptions; a
// translation's is ignored), prompt, response_format, temperature, stream and
// timestamp_granularities[] (segment; word is refused); any other field is a 400
// naming it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "corvid/server/multipart.h"
#include "corvid/server/request_fields.h"
#include "corvid/speech/speech_service.h"
#include "corvid/speech/transcript_format.h"

namespace corvid::server {

constexpr std::string_view kTranscriptionsPath = "/v1/audio/transcriptions";
constexpr std::string_view kTranslationsPath = "/v1/audio/translations";
inline bool is_audio_path(std::string_view path) { return path == kTranscriptionsPath || path == kTranslationsPath; }

// OpenAI's limit on an upload (25 MB), as a body limit that also holds the form around it.
constexpr uint64_t kDefaultMaxAudioBodyBytes = uint64_t{25} << 20;

// What a server's audio routes serve; service null: none (they answer 400).
struct SpeechBackend {
  SpeechService* service = nullptr;  // outlives the server
  std::string model_name;            // what /v1/models lists and audio requests may name
  bool multilingual = false;         // other languages than English, and translations
};

struct AudioRequest {
  std::string model;       // as the client named it ("" when absent)
  std::string_view file;   // the upload's bytes, into the request body
  std::string filename;    // the upload's name ("" when the client gave none)
  TranscribeOptions options;
  TranscriptFormat format = TranscriptFormat::Json;
  bool stream = false;
  // timestamp_granularities (verbose_json): segments unless only "word" is asked for;
  // "word" sets options.word_timestamps.
  bool segment_timestamps = true;
};

// The form of a request to `path` (one of the two above) for a model that is
// `multilingual` or not. A 400 naming the field for anything malformed or that the
// model cannot do (another language than English, or translating, on an English-only
// model). Decoding settings are the CLI's (faster-whisper's): beam 5, best of 5.
AudioRequest parse_audio_request(const MultipartForm& form, std::string_view path, bool multilingual);

// The whole answer in the asked format: its body and Content-Type.
struct AudioResponse {
  std::string body;
  std::string content_type;
};
AudioResponse audio_response(const Transcript& transcript, const AudioRequest& request);

// A streamed transcript's deltas: each segment's text, the transcript's leading
// whitespace dropped and trailing whitespace held back, so that the deltas add up to
// Transcript::text() exactly (the done event's text).
class TranscriptDeltas {
 public:
  // What to send for the next segment ("": nothing yet).
  std::string next(const std::string& segment_text);

 private:
  std::string held_;  // whitespace that is sent only if more text follows
  bool started_ = false;
};

// {"type": "transcript.text.delta", "delta"} and {"type": "transcript.text.done", "text"}.
Json transcript_delta_event(const std::string& delta);
Json transcript_done_event(const std::string& text);

}  // namespace corvid::server
