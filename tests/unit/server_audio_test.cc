// The audio API's request and response mapping without a model: multipart forms to
// TranscribeOptions (OpenAI's fields, its temperature rule, what an English-only model
// refuses), transcripts to each response_format, streamed deltas that add up to the
// done event's text, and the per-path body limits uploads get.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "corvid/server/audio_api.h"
#include "corvid/server/http.h"

namespace corvid::server {
namespace {

// A form from (name, value) pairs; "file" gets a filename. The parts view `fields`.
struct Form {
  std::vector<std::pair<std::string, std::string>> fields;
  Form(std::initializer_list<std::pair<const char*, const char*>> list) {
    for (const auto& [name, value] : list) fields.emplace_back(name, value);
  }
  MultipartForm form() const {
    MultipartForm out;
    for (const auto& [name, value] : fields) {
      MultipartPart p;
      p.name = name;
      p.has_filename = name == "file";
      p.filename = p.has_filename ? "a.wav" : "";
      p.body = value;
      out.parts.push_back(p);
    }
    return out;
  }
};

AudioRequest parse(const Form& f, std::string_view path = kTranscriptionsPath, bool multilingual = false) {
  return parse_audio_request(f.form(), path, multilingual);
}

ApiError error_from(const Form& f, std::string_view path = kTranscriptionsPath, bool multilingual = false) {
  try {
    parse_audio_request(f.form(), path, multilingual);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "");
}

TEST(AudioApi, DefaultsAreTheCliDecoding) {
  const Form f{{"file", "RIFF"}, {"model", "whisper-tiny.en"}};
  const AudioRequest r = parse(f, kTranscriptionsPath, false);
  EXPECT_EQ(r.model, "whisper-tiny.en");
  EXPECT_EQ(r.file, "RIFF");
  EXPECT_EQ(r.filename, "a.wav");
  EXPECT_EQ(r.format, TranscriptFormat::Json);
  EXPECT_FALSE(r.stream);
  const TranscribeOptions defaults;
  EXPECT_EQ(r.options.beam_size, defaults.beam_size);
  EXPECT_EQ(r.options.temperatures, defaults.temperatures);
  EXPECT_EQ(r.options.task, "transcribe");
  EXPECT_EQ(r.options.language, "");
}

TEST(AudioApi, FieldsMapToOptions) {
  const Form f{{"file", "x"},
               {"language", "English"},
               {"prompt", "Names: Corvid."},
               {"response_format", "verbose_json"},
               {"temperature", "0.4"},
               {"timestamp_granularities[]", "segment"}};
  const AudioRequest r = parse(f, kTranscriptionsPath, false);
  EXPECT_EQ(r.options.language, "en");
  EXPECT_EQ(r.options.initial_prompt, "Names: Corvid.");
  EXPECT_EQ(r.format, TranscriptFormat::VerboseJson);
  EXPECT_EQ(r.options.temperatures, std::vector<float>{0.4f});  // used alone
  // 0 keeps the fallback list, as OpenAI does.
  const Form zero{{"file", "x"}, {"temperature", "0.0"}};
  EXPECT_EQ(parse(zero, kTranscriptionsPath, false).options.temperatures.size(), 6u);
  // Empty values are unset (form clients send them so); stream as form text.
  const Form s{{"file", "x"}, {"language", ""}, {"stream", "true"}, {"response_format", "text"}};
  const AudioRequest streamed = parse(s, kTranscriptionsPath, false);
  EXPECT_TRUE(streamed.stream);
  EXPECT_EQ(streamed.options.language, "");
}

TEST(AudioApi, GranularitiesPickTheTimedLists) {
  const Form none{{"file", "x"}, {"response_format", "verbose_json"}};
  const AudioRequest plain = parse(none, kTranscriptionsPath, false);
  EXPECT_TRUE(plain.segment_timestamps);
  EXPECT_FALSE(plain.options.word_timestamps);
  const Form words{{"file", "x"}, {"response_format", "verbose_json"}, {"timestamp_granularities[]", "word"}};
  const AudioRequest w = parse(words, kTranscriptionsPath, false);
  EXPECT_FALSE(w.segment_timestamps);  // only what was asked for, as OpenAI answers
  EXPECT_TRUE(w.options.word_timestamps);
  const Form both{{"file", "x"},
                  {"response_format", "verbose_json"},
                  {"timestamp_granularities[]", "word"},
                  {"timestamp_granularities[]", "segment"}};
  const AudioRequest b = parse(both, kTranscriptionsPath, false);
  EXPECT_TRUE(b.segment_timestamps);
  EXPECT_TRUE(b.options.word_timestamps);
}

TEST(AudioApi, TranslationsNeedAMultilingualModel) {
  const Form f{{"file", "x"}, {"language", "klingon"}};  // a translation's language is ignored
  const AudioRequest r = parse(f, kTranslationsPath, true);
  EXPECT_EQ(r.options.task, "translate");
  EXPECT_EQ(r.options.language, "");
  const ApiError e = error_from(f, kTranslationsPath, false);
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("English-only"), std::string::npos);
}

TEST(AudioApi, BadFieldsAreNamed) {
  struct Case {
    Form form;
    const char* param;
    const char* words;
  };
  const std::vector<Case> cases = {
      {Form{{"model", "m"}}, "file", "'file' is required"},
      {Form{{"file", "x"}, {"language", "xx-nope"}}, "language", "unknown language"},
      {Form{{"file", "x"}, {"language", "fr"}}, "language", "English-only"},
      {Form{{"file", "x"}, {"response_format", "diarized_json"}}, "response_format", "must be json, text"},
      {Form{{"file", "x"}, {"temperature", "hot"}}, "temperature", "must be a number"},
      {Form{{"file", "x"}, {"temperature", "1.5"}}, "temperature", "must be in [0, 1]"},
      {Form{{"file", "x"}, {"temperature", "nan"}}, "temperature", "must be a number"},
      {Form{{"file", "x"}, {"timestamp_granularities[]", "word"}}, "timestamp_granularities[]",
       "needs response_format verbose_json, not json"},
      {Form{{"file", "x"}, {"timestamp_granularities[]", "phoneme"}}, "timestamp_granularities[]", "'segment' or"},
      {Form{{"file", "x"}, {"stream", "maybe"}}, "stream", "true or false"},
      {Form{{"file", "x"}, {"stream", "true"}, {"response_format", "srt"}}, "stream", "json or text, not srt"},
      {Form{{"file", "x"}, {"model", "a"}, {"model", "b"}}, "model", "given 2 times"},
      {Form{{"file", "x"}, {"chunking_strategy", "auto"}}, "chunking_strategy", "unknown field"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_from(c.form);
    EXPECT_EQ(e.status(), 400) << c.words;
    EXPECT_EQ(e.param(), c.param) << c.words;
    EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << e.what();
  }
  // A multilingual model takes other languages.
  const Form fr{{"file", "x"}, {"language", "French"}};
  EXPECT_EQ(parse(fr, kTranscriptionsPath, true).options.language, "fr");
}

Transcript two_segments() {
  Transcript t;
  t.language = "en";
  t.duration = 3.5;
  TranscriptSegment a, b;
  a.id = 1;
  a.start = 0;
  a.end = 1.5;
  a.text = " Hello there.";
  b.id = 2;
  b.start = 1.5;
  b.end = 3.25;
  b.text = " General Kenobi. ";
  t.segments = {a, b};
  return t;
}

TEST(AudioApi, ResponsesInEachFormat) {
  const Transcript t = two_segments();
  AudioRequest r;
  r.format = TranscriptFormat::Json;
  AudioResponse out = audio_response(t, r);
  EXPECT_EQ(out.content_type, "application/json");
  EXPECT_EQ(Json::parse(out.body), Json::parse(R"({"text": "Hello there. General Kenobi."})"));
  r.format = TranscriptFormat::Text;
  out = audio_response(t, r);
  EXPECT_EQ(out.body, "Hello there. General Kenobi.\n");
  EXPECT_EQ(out.content_type.rfind("text/plain", 0), 0u);
  r.format = TranscriptFormat::VerboseJson;
  const Json verbose = Json::parse(audio_response(t, r).body);
  EXPECT_EQ(verbose["task"], "transcribe");
  EXPECT_EQ(verbose["language"], "english");
  EXPECT_EQ(verbose["segments"].size(), 2u);
  EXPECT_EQ(verbose["segments"][1]["end"], 3.25);
  EXPECT_FALSE(verbose.contains("words"));
  EXPECT_FALSE(verbose["segments"][0].contains("words"));
  // Word timestamps: OpenAI's top-level list (trimmed words) and each segment's own.
  Transcript timed = t;
  timed.segments[0].words = {{" Hello", {1}, 0.0, 0.5, 0.9}, {" there.", {2, 3}, 0.5, 1.5, 0.75}};
  timed.segments[1].words = {{" General", {4}, 1.5, 2.0, 0.5}, {" Kenobi.", {5}, 2.0, 3.25, 0.25}};
  r.options.word_timestamps = true;
  r.segment_timestamps = false;
  const Json words = Json::parse(audio_response(timed, r).body);
  EXPECT_FALSE(words.contains("segments"));
  ASSERT_EQ(words["words"].size(), 4u);
  EXPECT_EQ(words["words"][1], Json::parse(R"({"end": 1.5, "start": 0.5, "word": "there."})"));
  r.segment_timestamps = true;
  const Json both = Json::parse(audio_response(timed, r).body);
  EXPECT_EQ(both["segments"][1]["words"][1],
            Json::parse(R"({"end": 3.25, "probability": 0.25, "start": 2.0, "word": " Kenobi."})"));
  r.options.word_timestamps = false;
  r.format = TranscriptFormat::Srt;
  EXPECT_EQ(audio_response(t, r).body.rfind("1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n2\n", 0), 0u);
  r.format = TranscriptFormat::Vtt;
  EXPECT_EQ(audio_response(t, r).body.rfind("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello there.", 0), 0u);
  // Text cut inside a UTF-8 sequence is replaced, not thrown on.
  Transcript broken = t;
  broken.segments[0].text = " caf\xc3";
  broken.segments.resize(1);
  r.format = TranscriptFormat::Json;
  EXPECT_NO_THROW(audio_response(broken, r));
}

TEST(AudioApi, StreamedDeltasAddUpToTheText) {
  for (const std::vector<std::string>& segments :
       std::vector<std::vector<std::string>>{{" Hello there.", " General Kenobi. "},
                                             {"  ", " a", "\n", "b  ", " "},
                                             {" one"},
                                             {}}) {
    Transcript t;
    TranscriptDeltas deltas;
    std::string streamed;
    for (const std::string& s : segments) {
      TranscriptSegment seg;
      seg.text = s;
      t.segments.push_back(seg);
      streamed += deltas.next(s);
    }
    EXPECT_EQ(streamed, t.text());
  }
  EXPECT_EQ(transcript_delta_event("hi")["type"], "transcript.text.delta");
  EXPECT_EQ(transcript_done_event("hi")["text"], "hi");
}

TEST(AudioApi, UploadPathsGetTheirOwnBodyLimit) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  EXPECT_EQ(limits.largest(), 1000u);
  limits.path_body_bytes.emplace_back(std::string(kTranscriptionsPath), 5000);
  EXPECT_EQ(limits.body_limit("/v1/audio/transcriptions"), 5000u);
  EXPECT_EQ(limits.body_limit("/v1/audio/transcriptions?x=1"), 5000u);
  EXPECT_EQ(limits.body_limit("/v1/audio/transcriptionsX"), 1000u);
  EXPECT_EQ(limits.body_limit("/v1/chat/completions"), 1000u);
  EXPECT_EQ(limits.largest(), 5000u);
}

}  // namespace
}  // namespace corvid::server
