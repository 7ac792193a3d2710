// Reasoning parsers: each family's markers, generation that starts inside reasoning
// (the prompt opened it), and every split point of every case.
#include <gtest/gtest.h>

#include "corvid/chat/reasoning_parser.h"
#include "corvid/core/error.h"
#include "output_parser_test_util.h"

namespace corvid::chat {
namespace {

using testing::Expected;
using testing::expect_every_split;
using testing::reasoning_options;

TEST(ReasoningParserThink, ReasoningThenAnswerAsQwen3WritesIt) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags),
                     "<think>\nThe user greets me; answer in French.\n</think>\n\nBonjour ! 👋",
                     Expected{"Bonjour ! 👋", "The user greets me; answer in French.", {}});
}

TEST(ReasoningParserThink, GenerationStartsInsideReasoning) {
  // Qwen3.5, QwQ and DeepSeek-R1 end the prompt with "<think>\n".
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags, true),
                     "Two plus two is four.\n  \nCheck: yes.\n</think>\n\n**4**",
                     Expected{"**4**", "Two plus two is four.\n  \nCheck: yes.", {}});
}

TEST(ReasoningParserThink, RepeatedOpenTagAfterPromptOpenedReasoningIsDropped) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags, true), "<think>\nHmm.\n</think>\n\nOK",
                     Expected{"OK", "Hmm.", {}});
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags, true), "<thin",
                     Expected{"", "<thin", {}});
}

TEST(ReasoningParserThink, EmptyReasoningAndNoReasoning) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags), "<think>\n\n</think>\n\nHi.",
                     Expected{"Hi.", "", {}});
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags), "Hi, no thinking here.",
                     Expected{"Hi, no thinking here.", "", {}});
}

TEST(ReasoningParserThink, LookalikesAndLaterTagsAreContent) {
  for (const char* text : {"<thinking>is not a tag</thinking>", "<thin", "I <think> so </think> too", "\n\n<think"}) {
    SCOPED_TRACE(text);
    expect_every_split(reasoning_options(ReasoningFormat::kThinkTags), text, Expected{text, "", {}});
  }
}

TEST(ReasoningParserThink, UnterminatedReasoningIsAllReasoning) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags), "<think>\nStill thinking about </thin",
                     Expected{"", "Still thinking about </thin", {}});
}

TEST(ReasoningParserThink, CloseTagWithNoAnswer) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags, true), "Done.</think>\n", Expected{"", "Done.", {}});
}

TEST(ReasoningParserThink, WhitespaceOnlyOutputIsReleased) {
  expect_every_split(reasoning_options(ReasoningFormat::kThinkTags), " \n", Expected{" \n", "", {}});
}

TEST(ReasoningParserGemma4, ThoughtChannel) {
  expect_every_split(reasoning_options(ReasoningFormat::kGemma4),
                     "<|channel>thought\nThe user wants a haiku.<channel|>Autumn moonlight—\na worm digs silently",
                     Expected{"Autumn moonlight—\na worm digs silently", "The user wants a haiku.", {}});
}

TEST(ReasoningParserGemma4, ThinkingDisabledPromptGivesPlainAnswer) {
  expect_every_split(reasoning_options(ReasoningFormat::kGemma4), "Hello <|channel> there",
                     Expected{"Hello <|channel> there", "", {}});
}

TEST(ReasoningParserMistral, ThinkBrackets) {
  expect_every_split(reasoning_options(ReasoningFormat::kMistral),
                     "[THINK]Let me compute 12*12 = 144.[/THINK]The answer is 144.",
                     Expected{"The answer is 144.", "Let me compute 12*12 = 144.", {}});
}

TEST(ReasoningParserHarmony, AnalysisThenFinalAsGptOssWritesIt) {
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony),
                     "<|channel|>analysis<|message|>User says hi. Respond politely.<|end|><|start|>assistant<|channel|>"
                     "final<|message|>Hello! How can I help?<|return|>",
                     Expected{"Hello! How can I help?", "User says hi. Respond politely.", {}});
}

TEST(ReasoningParserHarmony, LongHeaderNearTheLimitIsStillAHeader) {
  // Found by fuzzing: a prefix ending inside "<|message|>" past the header limit must
  // not be judged too long when the marker, once complete, starts within it.
  std::string text = "<|channel|>analysis" + std::string(230, ' ') + "<|message|>Deep thought.<|end|>";
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony), text, Expected{"", "Deep thought.", {}});
  std::string too_long = "<|channel|>analysis" + std::string(240, ' ') + "<|message|>x";
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony), too_long, Expected{too_long, "", {}});
}

TEST(ReasoningParserHarmony, SeveralAnalysisMessagesAreParagraphs) {
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony),
                     "<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis<|message|>"
                     "Second.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
                     Expected{"Answer.", "First.\n\nSecond.", {}});
}

TEST(ReasoningParserHarmony, PlainTextIsContent) {
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony), "Just text, <|end no harmony",
                     Expected{"Just text, <|end no harmony", "", {}});
}

TEST(ReasoningParserHarmony, StartsInsideAnalysis) {
  expect_every_split(reasoning_options(ReasoningFormat::kHarmony, true),
                     "Thinking.<|end|><|start|>assistant<|channel|>final<|message|>Done.",
                     Expected{"Done.", "Thinking.", {}});
}

TEST(ReasoningParserNone, EverythingIsContent) {
  expect_every_split(reasoning_options(ReasoningFormat::kNone), "<think>x</think>y", Expected{"<think>x</think>y", "", {}});
}

TEST(ReasoningParser, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", ReasoningFormat::kThinkTags));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", ReasoningFormat::kThinkTags));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n", ReasoningFormat::kThinkTags));
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>\n", ReasoningFormat::kThinkTags));
  EXPECT_FALSE(prompt_opens_reasoning("<|turn>model\n<|channel>thought\n<channel|>", ReasoningFormat::kGemma4));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", ReasoningFormat::kNone));
  EXPECT_TRUE(prompt_opens_reasoning("<|start|>assistant<|channel|>analysis<|message|>", ReasoningFormat::kHarmony));
}

TEST(ReasoningParser, DirectUseHoldsPartialClose) {
  ReasoningParser parser(ReasoningFormat::kThinkTags, true);
  std::vector<OutputEvent> events;
  parser.feed("abc\n</th", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, OutputEvent::Kind::kReasoning);
  EXPECT_EQ(events[0].text, "abc");
  parser.feed("ink>ok", events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, OutputEvent::Kind::kContent);
  EXPECT_EQ(events[1].text, "ok");
  parser.finish(events);
  EXPECT_EQ(parser.reasoning(), "abc");
  EXPECT_EQ(parser.content(), "ok");
}

TEST(ReasoningParser, FormatNamesRoundTrip) {
  for (ReasoningFormat f : {ReasoningFormat::kNone, ReasoningFormat::kThinkTags, ReasoningFormat::kGemma4,
                            ReasoningFormat::kMistral, ReasoningFormat::kHarmony})
    EXPECT_EQ(reasoning_format_from_name(reasoning_format_name(f)), f);
  EXPECT_THROW(reasoning_format_from_name("deep"), corvid::Error);
}

}  // namespace
}  // namespace corvid::chat
