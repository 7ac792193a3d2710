// Tokenizers built from GGUF metadata: SmolLM2 (gpt2 + "smollm") against the
// `tokenizers` oracle fixtures, llama.cpp's vocabulary test pairs, and the
// 512-token SentencePiece vocabulary of stories260K.
#include <gtest/gtest.h>

#include <filesystem>

#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "gguf_builder.h"
#include "tokenizer_oracle.h"

namespace corvid {
namespace {

using testing::check_against_oracle;
using testing::ids_text;
using testing::quoted;
using testing::shared_file;
using testing::source_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path << ": cannot open";
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t pos = 0;
  for (size_t next; (next = s.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    parts.push_back(s.substr(pos, next - pos));
  }
  parts.push_back(s.substr(pos));
  return parts;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

TEST(TokenizerGguf, SmolLM2MatchesOracle) {
  const std::string path = source_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (run scripts/fetch-model.sh)";
  auto gguf = GgufFile::open(path);
  auto tk = Tokenizer::from_gguf(*gguf);
  check_against_oracle(*tk, "smollm2");

  EXPECT_EQ(tk->vocab_size(), 49152);
  EXPECT_EQ(tk->bos_id(), 1);
  EXPECT_FALSE(tk->adds_bos());  // tokenizer.ggml.add_bos_token = false
  EXPECT_EQ(tk->eos_ids(), std::vector<int32_t>{2});
  EXPECT_EQ(tk->eos_token(), "<|im_end|>");
  EXPECT_TRUE(tk->is_special(0));
  EXPECT_NE(tk->chat_template().find("<|im_start|>"), std::string::npos);
  // Values llama.cpp gives for this model.
  EXPECT_EQ(tk->encode("Hello world! 123", false), (std::vector<int32_t>{19556, 905, 17, 216, 33, 34, 35}));
  EXPECT_EQ(tk->encode("  multiple   spaces", false), (std::vector<int32_t>{216, 2701, 256, 5600}));
}

// llama.cpp's test-tokenizer-0 pairs: every string must give exactly the listed ids.
// Returns the tokenizer for further checks. The caller skips when the .gguf is absent.
std::unique_ptr<Tokenizer> check_vocab_pairs(const std::string& name) {
  auto gguf_path = shared_file("tokenizers/gguf-vocab/ggml-vocab-" + name + ".gguf");
  const std::string base = source_dir() + "/tests/data/gguf-vocab/ggml-vocab-" + name + ".gguf";
  auto inputs = split(read_text(base + ".inp"), "\n__ggml_vocab_test__\n");
  auto lines = split(read_text(base + ".out"), "\n");
  EXPECT_EQ(inputs.size(), lines.size()) << base;
  if (inputs.size() != lines.size()) return nullptr;
  auto gguf = GgufFile::open(*gguf_path);
  auto tk = Tokenizer::from_gguf(*gguf);
  size_t mismatches = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto want = parse_ids(lines[i]);
    auto got = tk->encode(inputs[i], false);
    if (got != want && mismatches++ < 5) {
      ADD_FAILURE() << name << ": string #" << i << " " << quoted(inputs[i]) << "\n  expected " << ids_text(want)
                    << "\n  got      " << ids_text(got);
    }
  }
  std::cout << "[ vocab    ] " << name << ": " << inputs.size() << " strings, " << mismatches << " mismatches\n";
  return tk;
}

#define REQUIRE_VOCAB(name)                                              \
  if (!shared_file("tokenizers/gguf-vocab/ggml-vocab-" name ".gguf")) \
  GTEST_SKIP() << "shared/tokenizers/gguf-vocab/ggml-vocab-" name ".gguf not found"
#define VOCAB_TEST(test, name) \
  TEST(TokenizerGguf, test) {  \
    REQUIRE_VOCAB(name);       \
    check_vocab_pairs(name);   \
  }
VOCAB_TEST(VocabLlamaSpm, "llama-spm")
VOCAB_TEST(VocabGpt2, "gpt-2")
VOCAB_TEST(VocabPhi3, "phi-3")
VOCAB_TEST(VocabQwen35, "qwen35")

// Also: byte-level BPE is lossless, and the llama-bpe family adds BOS.
TEST(TokenizerGguf, VocabLlamaBpe) {
  REQUIRE_VOCAB("llama-bpe");
  auto tk = check_vocab_pairs("llama-bpe");
  ASSERT_TRUE(tk);
  EXPECT_TRUE(tk->adds_bos());
  EXPECT_EQ(tk->bos_id(), 128000);
  const auto corpus = testing::read_json_file(source_dir() + "/tests/tokenizer/corpus.json")
                          .at("strings")
                          .get<std::vector<std::string>>();
  size_t bad = 0;
  for (const auto& s : corpus) {
    // Lossless for text without special tokens.
    if (s.find("<|") != std::string::npos) continue;
    auto ids = tk->encode(s, false);
    if (tk->decode(ids, false) != s && bad++ < 3) ADD_FAILURE() << "round trip failed for " << quoted(s);
  }
}

std::unique_ptr<Tokenizer> from_image(const testing::GgufBuilder& b) {
  auto bytes = std::make_shared<testing::Bytes>(b.build());
  auto gguf = GgufFile::parse(bytes, bytes->data(), bytes->size(), "mem.gguf");
  return Tokenizer::from_gguf(*gguf);
}

std::string error_of(const testing::GgufBuilder& b) {
  try {
    from_image(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// tokenizer.ggml.model "gemma4", llama.cpp's Gemma 4 vocabulary, built from the Gemma 3
// tokenizer.json the way llama.cpp's converter writes one (tokens by id, merges in rank
// order, CONTROL for HF's special tokens, BYTE for <0xXX>, USER_DEFINED for HF's other
// added tokens, matched whole as HF does (the converter types Gemma 4's tool and channel
// tokens so), NORMAL for the rest; no scores: llama.cpp's are placeholders): BPE over raw
// UTF-8 with spaces as U+2581, split at newline runs, byte fallback. Held to
// transformers' encodings of the same tokenizer.json on the whole corpus
// (tests/tokenizer/expected/gemma3.json: 2400 strings, decode and streaming too).
TEST(TokenizerGguf, Gemma4VocabularyMatchesTransformersOnGemmaTokenizer) {
  const auto path = shared_file("tokenizers/gemma3/tokenizer.json");
  if (!path) GTEST_SKIP() << "shared/tokenizers/gemma3/tokenizer.json not found";
  const nlohmann::json j = testing::read_json_file(*path);
  const auto& vocab = j.at("model").at("vocab");
  std::vector<std::string> tokens(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) tokens.at(it.value().get<size_t>()) = it.key();
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') types[i] = 6;
  }
  for (const auto& a : j.at("added_tokens")) {
    const size_t id = a.at("id").get<size_t>();
    if (id >= tokens.size()) tokens.resize(id + 1), types.resize(id + 1, 1);
    tokens[id] = a.at("content").get<std::string>();
    types[id] = a.at("special").get<bool>() ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const auto& m : j.at("model").at("merges"))
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  testing::Bytes type_bytes;
  testing::put<uint32_t>(type_bytes, testing::I32);
  testing::put<uint64_t>(type_bytes, types.size());
  for (int32_t t : types) testing::put<int32_t>(type_bytes, t);
  testing::GgufBuilder b;
  b.str("general.architecture", "gemma4").str("tokenizer.ggml.model", "gemma4");
  b.str_array("tokenizer.ggml.tokens", tokens).raw("tokenizer.ggml.token_type", testing::ARRAY, type_bytes);
  b.str_array("tokenizer.ggml.merges", merges);
  b.u32("tokenizer.ggml.bos_token_id", 2).u32("tokenizer.ggml.eos_token_id", 1);
  auto tk = from_image(b);
  check_against_oracle(*tk, "gemma3");
}

TEST(TokenizerGguf, BadMetadataErrorsNameFileAndKey) {
  testing::GgufBuilder none;
  none.str("general.architecture", "llama");
  EXPECT_NE(error_of(none).find("mem.gguf: unsupported tokenizer.ggml.model ''"), std::string::npos) << error_of(none);

  testing::GgufBuilder pre;
  pre.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "klingon");
  pre.str_array("tokenizer.ggml.tokens", {"a", "b", "ab"}).str_array("tokenizer.ggml.merges", {"a b"});
  EXPECT_NE(error_of(pre).find("mem.gguf: unsupported tokenizer.ggml.pre 'klingon'"), std::string::npos)
      << error_of(pre);

  testing::GgufBuilder merge;
  merge.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "gpt-2");
  merge.str_array("tokenizer.ggml.tokens", {"a", "b"}).str_array("tokenizer.ggml.merges", {"a c"});
  EXPECT_NE(error_of(merge).find("mem.gguf: merge \"a c\""), std::string::npos) << error_of(merge);

  testing::GgufBuilder missing;
  missing.str("tokenizer.ggml.model", "llama");
  EXPECT_NE(error_of(missing).find("mem.gguf: tokenizer.ggml.tokens: missing"), std::string::npos)
      << error_of(missing);
}

TEST(TokenizerGguf, TinyByteLevelVocab) {
  testing::GgufBuilder b;
  std::vector<std::string> tokens;
  for (int c = 0; c < 256; ++c) tokens.push_back(tok::byte_to_unicode(static_cast<uint8_t>(c)));
  tokens.push_back("he");
  tokens.push_back("hel");
  tokens.push_back("<|end|>");
  b.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "gpt-2");
  b.str_array("tokenizer.ggml.tokens", tokens).str_array("tokenizer.ggml.merges", {"h e", "he l"});
  b.u32("tokenizer.ggml.eos_token_id", 258);
  testing::Bytes types;
  testing::put<uint32_t>(types, testing::I32);
  testing::put<uint64_t>(types, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) testing::put<int32_t>(types, i == 258 ? 3 : 1);  // <|end|>: control
  b.raw("tokenizer.ggml.token_type", testing::ARRAY, types);
  auto tk = from_image(b);
  EXPECT_EQ(tk->encode("help<|end|>", false), (std::vector<int32_t>{257, 'p', 258}));
  EXPECT_EQ(tk->decode(std::vector<int32_t>{257, 'p', 258}, false), "help<|end|>");
  EXPECT_EQ(tk->eos_ids(), std::vector<int32_t>{258});
}

// stories260K.greedy-from-bos.txt: "ids: [...]" then "text:" and the text, as the
// concatenated SentencePiece pieces (so it starts with the space of "▁Once").
TEST(TokenizerGguf, Stories260KDecodesKnownText) {
  const std::string dir = source_dir() + "/tests/data/";
  auto tk = Tokenizer::from_gguf(*GgufFile::open(dir + "stories260K.gguf"));
  EXPECT_EQ(tk->vocab_size(), 512);
  EXPECT_EQ(tk->bos_id(), 1);
  EXPECT_EQ(tk->eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tk->adds_bos());

  std::string file = read_text(dir + "stories260K.greedy-from-bos.txt");
  size_t ids_at = file.find("ids: [");
  size_t text_at = file.find("\ntext:\n");
  ASSERT_NE(ids_at, std::string::npos);
  ASSERT_NE(text_at, std::string::npos);
  std::string list = file.substr(ids_at + 6, file.find(']', ids_at) - ids_at - 6);
  for (char& c : list) c = c == ',' ? ' ' : c;
  auto ids = parse_ids(list);
  ASSERT_EQ(ids.size(), 200u);
  std::string text = file.substr(text_at + 7);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  ASSERT_EQ(text[0], ' ');

  // decode() strips the one space SentencePiece put in front of the first word (as HF and llama.cpp do).
  EXPECT_EQ(tk->decode(ids, false), text.substr(1));
  std::vector<int32_t> with_bos{1};
  with_bos.insert(with_bos.end(), ids.begin(), ids.end());
  EXPECT_EQ(tk->decode(with_bos, true), text.substr(1));
  EXPECT_EQ(tk->decode(with_bos, false), "<s>" + text);  // the space stays after a kept <s>
  // And the streamed pieces add up to the same text.
  StreamingDetokenizer stream(*tk, true);
  std::string streamed;
  for (int32_t id : with_bos) streamed += stream.push(id);
  streamed += stream.flush();
  EXPECT_EQ(streamed, text.substr(1));
  // Primed with the context, a continuation keeps its leading space.
  StreamingDetokenizer cont(*tk, true);
  cont.prime(std::span<const int32_t>(with_bos).first(3));
  std::string rest;
  for (size_t i = 3; i < with_bos.size(); ++i) rest += cont.push(with_bos[i]);
  rest += cont.flush();
  EXPECT_EQ(tk->decode(std::span<const int32_t>(with_bos).first(3), true) + rest, text.substr(1));
  // Encoding the text gives the model's tokens back.
  EXPECT_EQ(tk->encode(text.substr(1), true), with_bos);
}

}  // namespace
}  // namespace corvid
