// ApiServer's POST /v1/audio/transcriptions and /v1/audio/translations: the form is
// parsed and the upload decoded and resampled on the worker pool (CPU work, never on
// the io_context), the job goes to the speech service from the exchange's strand (so
// that a disconnect, which cancels it, is never missed), and the service's callbacks,
// on its worker thread, post each segment and the result back to the strand.
#include <chrono>
#include <span>

#include "corvid/audio/audio_file.h"
#include "corvid/server/api_server.h"
#include "corvid/server/audio_api.h"
#include "corvid/server/multipart.h"

namespace corvid::server {

namespace {

std::string sse(const Json& json) { return "data: " + to_text(json) + "\n\n"; }

}  // namespace

void ApiServer::check_speech_model(const std::string& requested) const {
  if (!requested.empty() && requested != speech_.model_name)
    throw ApiError(404, "the model '" + requested + "' does not exist (this server's speech model is '" +
                            speech_.model_name + "')",
                   "model", "model_not_found");
}

ApiServer::Action ApiServer::transcribe(const std::shared_ptr<Exchange>& exchange, const std::string& path) {
  const HttpRequest& http = exchange->request();
  const auto type = http.find(boost::beast::http::field::content_type);
  if (type == http.end()) throw ApiError(400, "the body must be multipart/form-data (a file upload); it has no Content-Type");
  const std::string boundary = multipart_boundary(std::string_view(type->value().data(), type->value().size()));
  const MultipartForm form = parse_multipart(http.body(), boundary);
  auto request = std::make_shared<AudioRequest>(parse_audio_request(form, path, speech_.multilingual));
  check_speech_model(request->model);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(request->file.data()), request->file.size());
  auto job = std::make_shared<SpeechJob>();
  job->audio = audio::resample(audio::decode(bytes, request->filename.empty() ? "file" : request->filename),
                               audio::kWhisperSampleRate);
  job->options = request->options;
  request->file = {};  // the job holds the samples; nothing reads the upload again

  return [this, exchange, request, job] {
    // Strand state: the stream's deltas and when it last sent anything.
    struct State {
      TranscriptDeltas deltas;
      Clock::time_point last_sent = Clock::now();
    };
    auto state = std::make_shared<State>();
    const bool stream = request->stream;
    SpeechCallbacks callbacks;
    if (stream)
      callbacks.segment = [exchange, state](const TranscriptSegment& segment) {
        exchange->post([exchange, state, text = segment.text] {
          const std::string delta = state->deltas.next(text);
          if (delta.empty()) return;
          exchange->send(sse(transcript_delta_event(delta)));
          state->last_sent = Clock::now();
        });
      };
    callbacks.done = [this, exchange, request](Transcript t) {
      auto transcript = std::make_shared<const Transcript>(std::move(t));
      exchange->post([this, exchange, request, transcript] {
        if (exchange->done()) return;
        if (request->stream) {
          exchange->send(sse(transcript_done_event(transcript->text())));
          return exchange->end_stream();
        }
        AudioResponse response = audio_response(*transcript, *request);
        metrics_.count_response(200);
        exchange->respond(200, std::move(response.body), response.content_type);
      });
    };
    callbacks.failed = [this, exchange, stream](const std::string& error) {
      exchange->post([this, exchange, stream, message = "transcription failed: " + error] {
        if (exchange->done()) return;  // the client went away (that is what cancelled it)
        if (!stream) return respond_error(*exchange, 500, message);
        exchange->send(sse(error_body(500, message)));
        exchange->end_stream();
      });
    };
    // Throws RequestRejected (429 when the queue is full), answered by guarded().
    const uint64_t id = speech_.service->submit(std::move(*job), std::move(callbacks));
    exchange->on_cancel([this, id] { speech_.service->cancel(id); });
    if (!stream) return;
    metrics_.count_response(200);
    exchange->begin_stream();
    // While the job waits its turn (or a long window decodes), an SSE comment every 10 s
    // keeps proxies and clients with read timeouts on the line; SSE clients skip it.
    constexpr std::chrono::seconds kQuiet{10};
    exchange->every(std::chrono::milliseconds(1000), [state, kQuiet](Exchange& ex) {
      if (Clock::now() - state->last_sent < kQuiet) return;
      ex.send(": keep-alive\n\n");
      state->last_sent = Clock::now();
    });
  };
}

}  // namespace corvid::server
