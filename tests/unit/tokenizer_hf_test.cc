// Tokenizers loaded from Hugging Face tokenizer.json files, checked against
// the `tokenizers` oracle fixtures, plus API behaviour (BOS/EOS, specials,
// errors) on the real Qwen3, Llama 3.1 and Gemma 3 files.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "corvid/core/error.h"
#include "tokenizer_oracle.h"

namespace corvid {
namespace {

using testing::check_against_oracle;
using testing::shared_file;

std::unique_ptr<Tokenizer> hf_tokenizer(const std::string& name) {
  auto json = shared_file("tokenizers/" + name + "/tokenizer.json");
  auto config = shared_file("tokenizers/" + name + "/tokenizer_config.json");
  if (!json) return nullptr;
  return Tokenizer::from_hf_files(*json, config.value_or(""));
}

// Small tokenizers trained by make_expected.py (committed) for components the real ones do not use.
std::unique_ptr<Tokenizer> synthetic(const std::string& name) {
  return Tokenizer::from_hf_files(testing::source_dir() + "/tests/tokenizer/synthetic/" + name + ".tokenizer.json", "");
}

#define REQUIRE_HF(var, name)                                                                                  \
  auto var = hf_tokenizer(name);                                                                               \
  if (!var) GTEST_SKIP() << "shared/tokenizers/" name "/tokenizer.json not found (set CORVID_SHARED_DIR to the " \
                            "shared test-data folder)"

TEST(TokenizerHf, SyntheticMetaspaceMatchesOracle) {
  check_against_oracle(*synthetic("synthetic_meta"), "synthetic_meta");
}
TEST(TokenizerHf, SyntheticSentencePieceMatchesOracle) {
  check_against_oracle(*synthetic("synthetic_spm"), "synthetic_spm");
}
TEST(TokenizerHf, SyntheticByteLevelMatchesOracle) {
  check_against_oracle(*synthetic("synthetic_bytelevel"), "synthetic_bytelevel");
}

// all-MiniLM-L6-v2's WordPiece tokenizer (committed: tests/data/tokenizers/): BertNormalizer
// (control characters, CJK spacing, accents, lowercase), BertPreTokenizer, WordPiece with
// [UNK] and its 100-character limit, the WordPiece decoder's cleanup, [CLS] ... [SEP].
TEST(TokenizerHf, MiniLmWordPieceMatchesOracle) {
  const std::string dir = testing::source_dir() + "/tests/data/tokenizers/all-MiniLM-L6-v2/";
  check_against_oracle(*Tokenizer::from_hf_files(dir + "tokenizer.json", dir + "tokenizer_config.json"), "minilm");
}

// The cases the corpus barely reaches, with the oracle's ids (tokenizers 0.22.1): HF's
// BERT categories are Unicode 8.0's (U+2E42 is punctuation, U+2E43 of Unicode 9 is not;
// U+061C is removed as a format character, U+08E2 of Unicode 9 is kept; U+0C00's accent is
// stripped, U+0D00's is not), CJK spacing, the 100-character limit, "##" continuations and
// the decoder's cleanup.
TEST(TokenizerHf, MiniLmWordPieceEdgeCases) {
  const std::string dir = testing::source_dir() + "/tests/data/tokenizers/all-MiniLM-L6-v2/";
  const auto tk = Tokenizer::from_hf_files(dir + "tokenizer.json", dir + "tokenizer_config.json");
  const struct {
    std::string text;
    std::vector<int32_t> ids;
    std::string decoded;
  } cases[] = {
      {"a\u2e42b a\u2e43b", {1037, 100, 1038, 100}, "a b"},
      {"x\u061cy x\u08e2y \ue000z", {1060, 2100, 100, 1062}, "xy z"},
      {"e\u0301t\u00e9 a\u0c00b a\u0d00b", {3802, 2063, 11113, 100}, "ete ab"},
      {"Hello, WORLD! It's 3.5\u00b0C in Z\u00fcrich.",
       {7592, 1010, 2088, 999, 2009, 1005, 1055, 1017, 1012, 1019, 7737, 2278, 1999, 10204, 1012},
       "hello, world! it ' s 3. 5\u00b0c in zurich."},
      {"\u4e2d\u6587 text", {1746, 1861, 3793}, "\u4e2d \u6587 text"},
      {std::string(101, 'x'), {100}, "[UNK]"},
      {"unaffable", {14477, 20961, 3468}, "unaffable"},
  };
  for (const auto& c : cases) {
    const std::vector<int32_t> ids = tk->encode(c.text, false);
    EXPECT_EQ(ids, c.ids) << c.text;
    if (c.decoded != "[UNK]") {
      EXPECT_EQ(tk->decode(ids, true), c.decoded) << c.text;
    }
  }
  const std::vector<int32_t> with = tk->encode("unaffable", true);
  EXPECT_EQ(with, (std::vector<int32_t>{101, 14477, 20961, 3468, 102}));  // [CLS] ... [SEP]
}

TEST(TokenizerHf, ConcurrentEncodeMatchesSerial) {
  // encode() is const and shares a word cache between threads.
  auto tk = synthetic("synthetic_bytelevel");
  const auto corpus = testing::read_json_file(testing::source_dir() + "/tests/tokenizer/corpus.json")
                          .at("strings")
                          .get<std::vector<std::string>>();
  std::vector<std::vector<int32_t>> serial;
  for (const auto& s : corpus) serial.push_back(tk->encode(s, true));
  std::atomic<size_t> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < corpus.size(); i += 2) {
        if (tk->encode(corpus[i], true) != serial[i]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0u);
}

// One test per real tokenizer: ctest runs each test in its own process, and
// loading a big tokenizer.json dominates the time under the sanitizers.
TEST(TokenizerHf, Qwen3) {
  REQUIRE_HF(tk, "qwen3");
  check_against_oracle(*tk, "qwen3");
  EXPECT_FALSE(tk->bos_id().has_value());
  EXPECT_FALSE(tk->adds_bos());
  EXPECT_EQ(tk->eos_token(), "<|im_end|>");
  ASSERT_EQ(tk->eos_ids().size(), 1u);
  EXPECT_EQ(tk->eos_ids()[0], 151645);
  EXPECT_EQ(tk->token_to_id("<|im_start|>"), 151644);
  EXPECT_TRUE(tk->is_special(151644));
  EXPECT_FALSE(tk->is_special(151667));  // <think> is an added token but not special
  EXPECT_EQ(tk->id_to_token(151667), "<think>");
  EXPECT_EQ(tk->vocab_size(), 151669);
  EXPECT_NE(tk->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tk->encode("<|im_start|>user", false), (std::vector<int32_t>{151644, 872}));
  std::vector<int32_t> ids{151644, 872, 151645};
  EXPECT_EQ(tk->decode(ids, false), "<|im_start|>user<|im_end|>");
  EXPECT_EQ(tk->decode(ids, true), "user");
}

TEST(TokenizerHf, Llama31) {
  REQUIRE_HF(tk, "llama3_1");
  check_against_oracle(*tk, "llama3_1");
  EXPECT_EQ(tk->bos_id(), 128000);
  EXPECT_TRUE(tk->adds_bos());
  EXPECT_EQ(tk->bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(tk->eos_token(), "<|eot_id|>");
  EXPECT_EQ(tk->encode("", true), (std::vector<int32_t>{128000}));
  EXPECT_EQ(tk->vocab_size(), 128256);
}

TEST(TokenizerHf, Gemma3) {
  REQUIRE_HF(tk, "gemma3");
  check_against_oracle(*tk, "gemma3");
  EXPECT_EQ(tk->bos_id(), 2);
  EXPECT_EQ(tk->eos_token(), "<end_of_turn>");
  EXPECT_EQ(tk->token_to_id("<start_of_turn>"), 105);
  auto ids = tk->encode("<start_of_turn>user\nHi", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 105);
}

TEST(TokenizerHf, InvalidUtf8InputIsReplaced) {
  auto tk = synthetic("synthetic_bytelevel");
  EXPECT_EQ(tk->encode("a\xff" "b", false), tk->encode("a\xEF\xBF\xBD" "b", false));
  EXPECT_EQ(tk->encode("\xE4\xBD", false), tk->encode("\xEF\xBF\xBD", false));
}

TEST(TokenizerHf, StreamingHoldsPartialCharacters) {
  auto tk = synthetic("synthetic_bytelevel");
  // "😁" is 4 bytes; byte-level tokens for each single byte.
  auto b0 = tk->token_to_id("ð");   // 0xF0
  auto b1 = tk->token_to_id("Ł");   // 0x9F
  auto b2 = tk->token_to_id("ĺ");   // 0x98
  auto b3 = tk->token_to_id("ģ");   // 0x81
  ASSERT_TRUE(b0 && b1 && b2 && b3);
  StreamingDetokenizer s(*tk, false);
  EXPECT_EQ(s.push(*b0), "");
  EXPECT_EQ(s.push(*b1), "");
  EXPECT_EQ(s.push(*b2), "");
  EXPECT_EQ(s.push(*b3), "\xF0\x9F\x98\x81");
  EXPECT_EQ(s.push(*b0), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");  // a dangling lead byte becomes U+FFFD, as in HF
}

TEST(TokenizerHf, MissingFileErrorNamesIt) {
  try {
    Tokenizer::from_hf_files("/nonexistent/tokenizer.json", "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace corvid
