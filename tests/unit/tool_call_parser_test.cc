// Tool-call parsers, one family at a time. Model outputs have the exact shape the
// family's chat template renders assistant tool calls in (see
// /work/shared/chat-templates); every case is fed whole, char by char and at every one-
// and two-cut split, and the streamed deltas must add up to the same message.
#include <gtest/gtest.h>

#include "corvid/chat/tool_call_parser.h"
#include "corvid/core/error.h"
#include "output_parser_test_util.h"

namespace corvid::chat {
namespace {

using testing::Expected;
using testing::expect_every_split;
using testing::tool_options;

const nlohmann::json kWeatherTools = nlohmann::json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather",
   "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
                  "required": ["location"]}}},
  {"type": "function", "function": {"name": "get_time",
   "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}
])");

const char* kWeatherArgs = R"({"location":"Zürich","days":3})";
const char* kTimeArgs = R"({"zone":"CET"})";

// ---- Hermes / Qwen2.5 / Qwen3 ----------------------------------------------------------

TEST(ToolCallParserHermes, ContentThenParallelCallsAsQwen3RendersThem) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Zürich\", "
                     "\"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": "
                     "\"CET\"}}\n</tool_call>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserHermes, SingleCallNoContent) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Zürich\", \"days\": "
                     "3}}\n</tool_call>\n",
                     Expected{"", "", {{"get_weather", kWeatherArgs}}});
}

TEST(ToolCallParserHermes, PlainAnswerStreamsUnchanged) {
  expect_every_split(tool_options(ToolFormat::kHermes), "Bonjour ! Il fait 20 °C à Zürich 🌞 <tool without call>\n",
                     Expected{"Bonjour ! Il fait 20 °C à Zürich 🌞 <tool without call>\n", "", {}});
}

TEST(ToolCallParserHermes, ArgumentsGivenAsJsonStringAndNestedValues) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>\n{\"name\": \"run\", \"arguments\": \"{\\\"cmd\\\": [\\\"ls\\\", \\\"-l\\\"], "
                     "\\\"env\\\": {\\\"A\\\": null}}\"}\n</tool_call>",
                     Expected{"", "", {{"run", R"({"cmd":["ls","-l"],"env":{"A":null}})"}}});
}

TEST(ToolCallParserHermes, CloseTagInsideAStringValueDoesNotEndTheCall) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"</tool_call> {[\\\"\"}}</tool_call>",
                     Expected{"", "", {{"echo", R"({"text":"</tool_call> {[\""})"}}});
}

TEST(ToolCallParserHermes, UnicodeEscapesBecomeUtf8) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>{\"name\":\"f\",\"arguments\":{\"z\":1,\"a\":\"\\u6771\\u4eac\"}}</tool_call>",
                     Expected{"", "", {{"f", R"({"z":1,"a":"東京"})"}}});
}

TEST(ToolCallParserHermes, MalformedJsonIsReturnedAsContent) {
  const char* text = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": }\n</tool_call>";
  expect_every_split(tool_options(ToolFormat::kHermes), text, Expected{text, "", {}});
}

TEST(ToolCallParserHermes, ValidJsonThatIsNoCallIsContent) {
  const char* text = "<tool_call>\n{\"arguments\": {}}\n</tool_call>";
  expect_every_split(tool_options(ToolFormat::kHermes), text, Expected{text, "", {}});
}

TEST(ToolCallParserHermes, TagMentionedInProseStaysContentAndLaterCallParses) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "I wrap calls in <tool_call> tags:\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
                     Expected{"I wrap calls in <tool_call> tags:", "", {{"f", "{}"}}});
}

TEST(ToolCallParserHermes, OutputEndingBeforeCloseTagStillCalls) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",
                     Expected{"", "", {{"f", R"({"a":1})"}}});
}

TEST(ToolCallParserHermes, TruncatedCallIsContent) {
  const char* text = "<tool_call>\n{\"name\": \"f\", \"argu";
  expect_every_split(tool_options(ToolFormat::kHermes), text, Expected{text, "", {}});
}

TEST(ToolCallParserHermes, ContentAfterCallKeepsItsText) {
  expect_every_split(tool_options(ToolFormat::kHermes),
                     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nDone  now.\n",
                     Expected{"Done  now.\n", "", {{"f", "{}"}}});
}

// ---- XML function style: Qwen3-Coder, Qwen3.5 -----------------------------------------

TEST(ToolCallParserXml, ContentThenParallelCallsAsQwen35RendersThem) {
  expect_every_split(tool_options(ToolFormat::kXmlFunction, kWeatherTools),
                     "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nZürich\n</parameter>\n"
                     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
                     "<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserXml, ValuesTypedBySchema) {
  nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {
      "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
      "o": {"type": "object"}, "a": {"type": "array", "items": {"type": "string"}},
      "s": {"type": "string"}, "maybe": {"type": ["integer", "null"]}, "any": {"anyOf": [{"type": "number"}, {"type": "string"}]},
      "bad_int": {"type": "integer"}}}}}])");
  expect_every_split(tool_options(ToolFormat::kXmlFunction, tools),
                     "<tool_call>\n<function=f>\n<parameter=i>\n-42\n</parameter>\n<parameter=n>\n2.5\n</parameter>\n"
                     "<parameter=b>\ntrue\n</parameter>\n<parameter=o>\n{\"k\": [1, 2]}\n</parameter>\n"
                     "<parameter=a>\n[\"x\", \"y\"]\n</parameter>\n<parameter=s>\n007\n</parameter>\n"
                     "<parameter=maybe>\nnull\n</parameter>\n<parameter=any>\n1e3\n</parameter>\n"
                     "<parameter=bad_int>\nmany\n</parameter>\n<parameter=unknown>\n12\n</parameter>\n"
                     "</function>\n</tool_call>",
                     Expected{"", "",
                              {{"f", R"({"i":-42,"n":2.5,"b":true,"o":{"k":[1,2]},"a":["x","y"],"s":"007","maybe":null,)"
                                     R"("any":1000.0,"bad_int":"many","unknown":"12"})"}}});
}

TEST(ToolCallParserXml, MultiLineValueKeepsInnerNewlines) {
  nlohmann::json tools = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}}}])");
  expect_every_split(tool_options(ToolFormat::kXmlFunction, tools),
                     "<tool_call>\n<function=write>\n<parameter=path>\na.py\n</parameter>\n<parameter=text>\n"
                     "def f():\n    return \"<tag>\"\n\n</parameter>\n</function>\n</tool_call>",
                     Expected{"", "", {{"write", R"({"path":"a.py","text":"def f():\n    return \"<tag>\"\n"})"}}});
}

TEST(ToolCallParserXml, BareFunctionAndMissingParameterClose) {
  // Qwen3-Coder sometimes drops <tool_call> and </parameter>.
  expect_every_split(tool_options(ToolFormat::kXmlFunction, kWeatherTools),
                     "<function=get_weather>\n<parameter=location>\nZürich\n<parameter=days>\n3\n</function>",
                     Expected{"", "", {{"get_weather", kWeatherArgs}}});
}

TEST(ToolCallParserXml, MissingFunctionCloseIsContent) {
  const char* text = "<tool_call>\n<function=get_weather>\n<parameter=location>\nZürich\n</parameter>\n</tool_call>";
  expect_every_split(tool_options(ToolFormat::kXmlFunction, kWeatherTools), text, Expected{text, "", {}});
}

TEST(ToolCallParserXml, ToolCallTagWithoutFunctionIsContent) {
  const char* text = "Use <tool_call> with JSON inside";
  expect_every_split(tool_options(ToolFormat::kXmlFunction), text, Expected{text, "", {}});
}

TEST(ToolCallParserXml, InvalidUtf8InAValueIsReplacedNotThrown) {
  expect_every_split(tool_options(ToolFormat::kXmlFunction, kWeatherTools),
                     "<function=get_weather>\n<parameter=location>\nZ\xC3\n</parameter>\n</function>",
                     Expected{"", "", {{"get_weather", "{\"location\":\"Z\xEF\xBF\xBD\"}"}}});
}

// ---- MiniCPM5 ------------------------------------------------------------------------

TEST(ToolCallParserMiniCpm, ContentThenParallelCallsAsTemplateRendersThem) {
  expect_every_split(tool_options(ToolFormat::kMiniCpm, kWeatherTools),
                     "Let me check.\n<function name=\"get_weather\"><param name=\"location\">Zürich</param><param "
                     "name=\"days\">3</param></function>\n<function name=\"get_time\"><param "
                     "name=\"zone\">CET</param></function>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserMiniCpm, CdataValueMayHoldMarkup) {
  nlohmann::json tools = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "force": {"type": "boolean"}}}}}])");
  expect_every_split(tool_options(ToolFormat::kMiniCpm, tools),
                     "<function name=\"write\"><param name=\"text\"><![CDATA[a < b && </function>\nend]]></param><param "
                     "name=\"force\">True</param></function>",
                     Expected{"", "", {{"write", R"({"text":"a < b && </function>\nend","force":true})"}}});
}

TEST(ToolCallParserMiniCpm, MalformedCallIsContent) {
  const char* text = "<function name=\"get_weather\"><param name=\"location\">Paris</function>";
  expect_every_split(tool_options(ToolFormat::kMiniCpm, kWeatherTools), text, Expected{text, "", {}});
}

// ---- Llama 3.1 / 3.2 / 3.3 -----------------------------------------------------------

TEST(ToolCallParserLlama3, WholeOutputIsTheCall) {
  expect_every_split(tool_options(ToolFormat::kLlama3),
                     "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Zürich\", \"days\": 3}}",
                     Expected{"", "", {{"get_weather", kWeatherArgs}}});
}

TEST(ToolCallParserLlama3, PythonTagPrefixAndChainedCalls) {
  expect_every_split(tool_options(ToolFormat::kLlama3),
                     "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Zürich\", \"days\": "
                     "3}}; {\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}",
                     Expected{"", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserLlama3, PlainAnswerAndJsonAnswerAreContent) {
  expect_every_split(tool_options(ToolFormat::kLlama3), "It is sunny in Zürich.", Expected{"It is sunny in Zürich.", "", {}});
  expect_every_split(tool_options(ToolFormat::kLlama3), "{\"name\": \"Ada\", \"age\": 36}",
                     Expected{"{\"name\": \"Ada\", \"age\": 36}", "", {}});
  // A call the answer only mentions later is not a call: calls are the whole output.
  const char* later = "Call it like {\"name\": \"f\", \"parameters\": {}}";
  expect_every_split(tool_options(ToolFormat::kLlama3), later, Expected{later, "", {}});
}

TEST(ToolCallParserLlama3, TrailingTextAfterCallMakesItContent) {
  const char* text = "{\"name\": \"f\", \"parameters\": {}} and then some";
  expect_every_split(tool_options(ToolFormat::kLlama3), text, Expected{text, "", {}});
}

// ---- Mistral -------------------------------------------------------------------------

TEST(ToolCallParserMistral, NemoArrayForm) {
  expect_every_split(tool_options(ToolFormat::kMistral),
                     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Zürich\", \"days\": 3}, "
                     "\"id\": \"abc123def\"}, {\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}, \"id\": "
                     "\"xyz789uvw\"}]",
                     Expected{"", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserMistral, Small32FormWithCallIds) {
  expect_every_split(tool_options(ToolFormat::kMistral),
                     "[TOOL_CALLS]get_weather[CALL_ID]abc123def[ARGS]{\"location\": \"Zürich\", \"days\": "
                     "3}[TOOL_CALLS]get_time[CALL_ID]xyz789uvw[ARGS]{\"zone\": \"CET\"}",
                     Expected{"", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserMistral, DevstralFormAfterContent) {
  expect_every_split(tool_options(ToolFormat::kMistral),
                     "Let me check.[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Zürich\", \"days\": "
                     "3}[TOOL_CALLS]get_time[ARGS]{\"zone\": \"CET\"}",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserMistral, BracesInsideStringsDoNotEndTheArguments) {
  expect_every_split(tool_options(ToolFormat::kMistral), "[TOOL_CALLS]echo[ARGS]{\"text\": \"}]{[\\\"\"}",
                     Expected{"", "", {{"echo", R"({"text":"}]{[\""})"}}});
}

TEST(ToolCallParserMistral, MalformedFormsAreContent) {
  for (const char* text : {"[TOOL_CALLS]get weather[ARGS]{}", "[TOOL_CALLS]f[ARGS]{\"a\": tru}",
                           "[TOOL_CALLS][{\"name\": \"f\"}, 3]", "[TOOL_CALLS]f[ARGS]{\"a\": 1"}) {
    SCOPED_TRACE(text);
    expect_every_split(tool_options(ToolFormat::kMistral), text, Expected{text, "", {}});
  }
}

// ---- Gemma 4 -------------------------------------------------------------------------

TEST(ToolCallParserGemma4, ParallelCallsThenToolResponseMarkerAsTemplateRendersThem) {
  expect_every_split(tool_options(ToolFormat::kGemma4),
                     "<|tool_call>call:get_weather{days:3,location:<|\"|>Zürich<|\"|>}<tool_call|><|tool_call>call:"
                     "get_time{zone:<|\"|>CET<|\"|>}<tool_call|><|tool_response>",
                     Expected{"", "",
                              {{"get_weather", R"({"days":3,"location":"Zürich"})"}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserGemma4, NestedValuesBooleansAndQuotedMarkup) {
  expect_every_split(tool_options(ToolFormat::kGemma4),
                     "I will search.<|tool_call>call:search{filters:{max:2.5,tags:[<|\"|>a,b<|\"|>,<|\"|>}<tool_call|>"
                     "<|\"|>]},exact:false,limit:-1,none:null,query:<|\"|>say \"hi\": {x}<|\"|>}<tool_call|>",
                     Expected{"I will search.", "",
                              {{"search", R"({"filters":{"max":2.5,"tags":["a,b","}<tool_call|>"]},"exact":false,)"
                                          R"("limit":-1,"none":null,"query":"say \"hi\": {x}"})"}}});
}

TEST(ToolCallParserGemma4, EmptyArguments) {
  expect_every_split(tool_options(ToolFormat::kGemma4), "<|tool_call>call:now{}<tool_call|>",
                     Expected{"", "", {{"now", "{}"}}});
}

TEST(ToolCallParserGemma4, MalformedCallsAreContent) {
  for (const char* text : {"<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>", "<|tool_call>call:f{a:1,}<tool_call|>",
                           "<|tool_call>f{a:1}<tool_call|>", "<|tool_call>call:f{a:1}"}) {
    SCOPED_TRACE(text);
    expect_every_split(tool_options(ToolFormat::kGemma4), text, Expected{text, "", {}});
  }
}

// ---- gpt-oss (harmony) without the reasoning layer ------------------------------------

TEST(ToolCallParserHarmony, CommentaryMessageToFunction) {
  expect_every_split(tool_options(ToolFormat::kHarmony),
                     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": "
                     "\"Zürich\", \"days\": 3}<|call|>",
                     Expected{"", "", {{"get_weather", kWeatherArgs}}});
}

// ---- DeepSeek V3.1, Kimi K2, GLM-4.6 -----------------------------------------------

TEST(ToolCallParserDeepSeek, ContentThenParallelCallsAsV31RendersThem) {
  expect_every_split(tool_options(ToolFormat::kDeepSeek),
                     "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": "
                     "\"Zürich\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": "
                     "\"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserDeepSeek, MalformedArgumentsAreContent) {
  const char* text = "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": Zürich}<｜tool▁call▁end｜>";
  expect_every_split(tool_options(ToolFormat::kDeepSeek), text, Expected{text, "", {}});
}

TEST(ToolCallParserDeepSeek, R1FencedFormAsDistillTemplateRendersIt) {
  expect_every_split(tool_options(ToolFormat::kDeepSeek),
                     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                     "{\"location\": \"Zürich\", \"days\": 3}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
                     "<｜tool▁sep｜>get_time\n```json\n{\"zone\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                     Expected{"", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserDeepSeek, R1FenceNotClosedIsContent) {
  const char* text = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n<｜tool▁call▁end｜>";
  expect_every_split(tool_options(ToolFormat::kDeepSeek), text, Expected{text, "", {}});
}

TEST(ToolCallParserKimi, CallIdsGiveTheNames) {
  expect_every_split(tool_options(ToolFormat::kKimi),
                     "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
                     "argument_begin|>{\"location\": \"Zürich\", \"days\": 3}<|tool_call_end|><|tool_call_begin|>"
                     "functions.get_time:1<|tool_call_argument_begin|>{\"zone\": \"CET\"}<|tool_call_end|><|tool_calls_"
                     "section_end|>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserKimi, LongNameNearTheLimit) {
  std::string name(240, 'n');
  std::string text = "<|tool_call_begin|>functions." + name + ":0<|tool_call_argument_begin|>{}<|tool_call_end|>";
  expect_every_split(tool_options(ToolFormat::kKimi), text, Expected{"", "", {{name, "{}"}}});
}

TEST(ToolCallParserGlm, ArgKeyValuePairsTypedBySchema) {
  expect_every_split(tool_options(ToolFormat::kGlm, kWeatherTools),
                     "Let me check.\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Zürich</arg_value>\n"
                     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>"
                     "zone</arg_key>\n<arg_value>CET</arg_value>\n</tool_call>",
                     Expected{"Let me check.", "", {{"get_weather", kWeatherArgs}, {"get_time", kTimeArgs}}});
}

TEST(ToolCallParserGlm, MissingValueIsContent) {
  const char* text = "<tool_call>get_weather\n<arg_key>location</arg_key>\n</tool_call>";
  expect_every_split(tool_options(ToolFormat::kGlm, kWeatherTools), text, Expected{text, "", {}});
}

// ---- Plumbing ------------------------------------------------------------------------

TEST(ToolCallParserNone, EverythingIsContent) {
  const char* text = "  <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n";
  expect_every_split(tool_options(ToolFormat::kNone), text, Expected{text, "", {}});
}

TEST(ToolCallParser, IdsAreCallPrefixedAlphanumericAndSeedable) {
  ToolCallIdGenerator a(1), b(1), c(2);
  std::string id = a.next();
  ASSERT_EQ(id.size(), 29u);
  EXPECT_TRUE(id.starts_with("call_"));
  for (char ch : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << id;
  EXPECT_EQ(id, b.next());
  EXPECT_NE(id, c.next());
  EXPECT_NE(a.next(), id);
  EXPECT_NE(ToolCallIdGenerator().next(), ToolCallIdGenerator().next());
}

TEST(ToolCallParser, DirectUseMatchesWholeParse) {
  ToolCallParser parser(ToolFormat::kHermes, nlohmann::json::array(), ToolCallIdGenerator(3));
  std::vector<OutputEvent> events;
  parser.feed("Hi <tool", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hi");  // the space and the partial tag are held
  parser.feed("_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>", events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].kind, OutputEvent::Kind::kToolCallStart);
  EXPECT_EQ(events[1].name, "f");
  EXPECT_EQ(events[2].kind, OutputEvent::Kind::kToolCallArguments);
  EXPECT_EQ(events[2].text, R"({"x":1})");
  parser.finish(events);
  ToolParseResult whole = parse_tool_calls("Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>",
                                           ToolFormat::kHermes, nlohmann::json::array(), ToolCallIdGenerator(3));
  EXPECT_EQ(parser.content(), whole.content);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(parser.tool_calls()[0].id, whole.tool_calls[0].id);
  EXPECT_THROW(parser.feed("more", events), corvid::Error);
}

TEST(ToolCallParser, FormatNamesRoundTrip) {
  for (ToolFormat f : {ToolFormat::kNone, ToolFormat::kHermes, ToolFormat::kXmlFunction, ToolFormat::kMiniCpm,
                       ToolFormat::kLlama3, ToolFormat::kMistral, ToolFormat::kGemma4, ToolFormat::kHarmony,
                       ToolFormat::kDeepSeek, ToolFormat::kKimi, ToolFormat::kGlm})
    EXPECT_EQ(tool_format_from_name(tool_format_name(f)), f);
  EXPECT_THROW(tool_format_from_name("qwen9"), corvid::Error);
}

}  // namespace
}  // namespace corvid::chat
