#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "gguf_builder.h"

namespace corvid {
namespace {

using testing::Bytes;
using testing::GgufBuilder;
namespace T = testing;

const std::string kStories = std::string(CORVID_SOURCE_DIR) + "/tests/data/stories260K.gguf";

std::shared_ptr<GgufFile> parse(const Bytes& b) {
  auto copy = std::make_shared<Bytes>(b);
  return GgufFile::parse(copy, copy->data(), copy->size(), "mem.gguf");
}

// Parses `b` expecting a corvid::Error whose message is one line naming the
// file and containing `needle`.
void expect_error(const Bytes& b, const std::string& needle) {
  try {
    parse(b);
    ADD_FAILURE() << "parsed without error; expected: " << needle;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("mem.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected to contain: " << needle;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// A small valid model-like file: metadata of several types and two tensors.
GgufBuilder small_file() {
  GgufBuilder g;
  g.str("general.architecture", "llama").u32("llama.block_count", 1).f32("llama.rope.freq_base", 10000.0f);
  g.str_array("tokenizer.ggml.tokens", {"<s>", "a", "b"});
  g.tensor("token_embd.weight", {4, 3}, 0, 4 * 3 * 4, std::nullopt, 0x11);
  g.tensor("blk.0.attn_q.weight", {32, 2}, 8, 2 * 34, std::nullopt, 0x22);
  return g;
}

TEST(Gguf, ReadsStories260K) {
  auto f = GgufFile::open(kStories);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_NEAR(f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f->get_int("tokenizer.ggml.seperator_token_id"), 4294967295);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), 512u);

  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));  // ne = [64, 512] in the file
  EXPECT_EQ(emb->dtype, DType::F32);
  EXPECT_EQ(emb->view.shape_str(), "[512, 64]");
  EXPECT_EQ(emb->offset, 0u);
  // The data section starts at byte 14176 (checked with the gguf Python package).
  auto mapped = std::static_pointer_cast<const MappedFile>(f->owner());
  EXPECT_EQ(static_cast<const uint8_t*>(emb->view.data) - mapped->data(), 14176);
  const GgufTensorInfo* ffn = f->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(ffn, nullptr);
  EXPECT_EQ(ffn->shape, (std::vector<int64_t>{64, 172}));
  for (const GgufTensorInfo& t : f->tensors()) {
    EXPECT_TRUE(std::isfinite(t.view.ptr<float>()[0])) << t.name;
    EXPECT_EQ(t.offset % 32, 0u);
  }
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

// The real default model, when scripts/fetch-model.sh has fetched it (CI) or
// CORVID_SMOLLM2_GGUF points at it; skipped otherwise.
std::string smollm2_path() {
  if (const char* env = std::getenv("CORVID_SMOLLM2_GGUF")) return env;
  std::string p = std::string(CORVID_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(p) ? p : "";
}

TEST(Gguf, ReadsSmolLM2Q4_1) {
  std::string path = smollm2_path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 GGUF not present (run scripts/fetch-model.sh)";
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->get_int("llama.vocab_size"), 49152);
  EXPECT_EQ(f->get_string_array("general.languages"), std::vector<std::string>{"en"});
  EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 48900u);
  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::Q8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{49152, 576}));
  const GgufTensorInfo* down = f->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dtype, DType::Q4_1);
  EXPECT_EQ(down->shape, (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(down->view.nbytes(), 576u * 1536 / 32 * 20);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied embeddings
}

TEST(Gguf, ParsesEveryValueType) {
  GgufBuilder g;
  g.scalar<uint8_t>("u8", T::U8, 200).scalar<int8_t>("i8", T::I8, -5);
  g.scalar<uint16_t>("u16", T::U16, 60000).scalar<int16_t>("i16", T::I16, -30000);
  g.scalar<uint32_t>("u32", T::U32, 4000000000u).scalar<int32_t>("i32", T::I32, -7);
  g.scalar<uint64_t>("u64", T::U64, ~0ull).scalar<int64_t>("i64", T::I64, -1234567890123ll);
  g.scalar<float>("f32", T::F32, 0.5f).scalar<double>("f64", T::F64, 0.1);
  g.scalar<uint8_t>("yes", T::BOOL, 1).scalar<uint8_t>("no", T::BOOL, 0);
  g.str("s", "hello").str("empty", "");
  // [[1, 2], [3]] as an array of int32 arrays.
  Bytes nested;
  T::put<uint32_t>(nested, T::ARRAY);
  T::put<uint64_t>(nested, 2);
  for (std::vector<int32_t> inner : {std::vector<int32_t>{1, 2}, std::vector<int32_t>{3}}) {
    T::put<uint32_t>(nested, T::I32);
    T::put<uint64_t>(nested, inner.size());
    for (int32_t x : inner) T::put<int32_t>(nested, x);
  }
  g.raw("nested", T::ARRAY, nested);
  auto f = parse(g.build());

  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -5);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -7);
  EXPECT_THROW(f->get_int("u64"), Error);  // does not fit int64
  EXPECT_EQ(std::get<uint64_t>(f->find("u64")->value), ~0ull);
  EXPECT_EQ(f->get_int("i64"), -1234567890123ll);
  EXPECT_EQ(f->get_float("f32"), 0.5);
  EXPECT_EQ(f->get_float("f64"), 0.1);
  EXPECT_EQ(f->get_float("u8"), 200.0);  // ints convert to double
  EXPECT_TRUE(f->get_bool("yes"));
  EXPECT_FALSE(f->get_bool("no"));
  EXPECT_EQ(f->get_string("s"), "hello");
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->find("u16")->type, T::U16);
  const auto& outer = std::get<GgufArray>(f->find("nested")->value);
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(std::get<GgufArray>(outer[0].value).size(), 2u);
  EXPECT_EQ(std::get<int64_t>(std::get<GgufArray>(outer[1].value)[0].value), 3);
  EXPECT_TRUE(f->tensors().empty());

  // Defaults apply only when a key is absent; a wrong type still throws.
  EXPECT_EQ(f->get_int("absent", 42), 42);
  EXPECT_EQ(f->get_string("absent", "x"), "x");
  EXPECT_EQ(f->get_float("absent", 2.5), 2.5);
  EXPECT_TRUE(f->get_bool("absent", true));
  EXPECT_THROW(f->get_int("s", 1), Error);
  EXPECT_THROW(f->get_string("u8"), Error);
  EXPECT_THROW(f->get_bool("u8"), Error);
  EXPECT_THROW(f->get_float("s"), Error);
  EXPECT_THROW(f->get_string_array("s"), Error);
  EXPECT_THROW(f->get_int_array("nested"), Error);
  try {
    f->get_int("missing.key");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "mem.gguf: missing metadata missing.key");
  }
}

TEST(Gguf, ReadsEverySupportedTensorType) {
  struct Case { uint32_t id; DType dt; uint64_t elems; size_t bytes; };
  const Case cases[] = {{0, DType::F32, 4, 16},     {1, DType::F16, 4, 8},       {30, DType::BF16, 4, 8},
                        {8, DType::Q8_0, 32, 34},   {2, DType::Q4_0, 32, 18},    {3, DType::Q4_1, 32, 20},
                        {6, DType::Q5_0, 32, 22},   {7, DType::Q5_1, 32, 24},    {12, DType::Q4_K, 256, 144},
                        {13, DType::Q5_K, 256, 176}, {14, DType::Q6_K, 256, 210}};
  // (std::string("t") += … rather than "t" + …: GCC 12 warns falsely on the latter at -O3.)
  auto name = [](uint32_t id) { return std::string("t") += std::to_string(id); };
  GgufBuilder g;
  for (const Case& c : cases) g.tensor(name(c.id), {c.elems, 3}, c.id, c.bytes * 3);
  auto f = parse(g.build());
  for (const Case& c : cases) {
    const GgufTensorInfo* t = f->find_tensor(name(c.id));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, c.dt);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{3, static_cast<int64_t>(c.elems)}));
    EXPECT_EQ(t->view.nbytes(), c.bytes * 3);
  }
}

TEST(Gguf, VersionTwoAndCustomAlignment) {
  GgufBuilder g = small_file();
  g.version = 2;
  g.alignment = 64;
  g.u32("general.alignment", 64);
  Bytes b = g.build();
  auto f = parse(b);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  const GgufTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->offset, 64u);
  EXPECT_EQ(static_cast<const uint8_t*>(q->view.data)[0], 0x22);
  EXPECT_EQ(static_cast<const uint8_t*>(f->find_tensor("token_embd.weight")->view.data)[47], 0x11);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "a", "b"}));
}

TEST(Gguf, EveryTruncationFailsCleanly) {
  Bytes full = small_file().build();
  ASSERT_NO_THROW(parse(full));
  for (size_t n = 0; n < full.size(); ++n) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), Error) << "prefix of " << n << " bytes";
  }
}

TEST(Gguf, RejectsBadHeader) {
  Bytes b = small_file().build();
  b[0] = 'X';
  expect_error(b, "bad magic");
  expect_error(Bytes{'G', 'G'}, "bad magic");
  for (uint32_t v : {1u, 4u, 0x03000000u}) {
    GgufBuilder g = small_file();
    g.version = v;
    expect_error(g.build(), "unsupported GGUF version " + std::to_string(v));
  }
  GgufBuilder g = small_file();
  g.tensor_count = 1ull << 40;
  expect_error(g.build(), "tensor count 1099511627776 cannot fit");
  g = small_file();
  g.kv_count = ~0ull;
  expect_error(g.build(), "metadata count");
  g = small_file();
  g.kv_count = g.n_kv + 1;  // one more key than present: runs into the tensor infos
  EXPECT_THROW(parse(g.build()), Error);
}

TEST(Gguf, RejectsBadMetadata) {
  GgufBuilder g;
  Bytes huge_string;
  T::put<uint64_t>(huge_string, 1ull << 62);
  g.raw("k", T::STRING, huge_string);
  expect_error(g.build(), "past the end of the file");

  g = GgufBuilder();
  Bytes huge_array;
  T::put<uint32_t>(huge_array, T::U32);
  T::put<uint64_t>(huge_array, 1ull << 60);
  g.raw("arr", T::ARRAY, huge_array);
  expect_error(g.build(), "metadata arr: array of 1152921504606846976 elements cannot fit");

  g = GgufBuilder();
  g.scalar<uint32_t>("weird", 13, 0);
  expect_error(g.build(), "metadata weird: unknown value type 13");

  g = GgufBuilder();
  Bytes bad_elem;
  T::put<uint32_t>(bad_elem, 99);
  T::put<uint64_t>(bad_elem, 1);
  g.raw("arr", T::ARRAY, bad_elem);
  expect_error(g.build(), "metadata arr: unknown array element type 99");

  g = GgufBuilder();
  g.scalar<uint8_t>("flag", T::BOOL, 7);
  expect_error(g.build(), "metadata flag: bool value 7");

  g = GgufBuilder();
  Bytes deep;
  for (int i = 0; i < 20; ++i) {
    T::put<uint32_t>(deep, T::ARRAY);
    T::put<uint64_t>(deep, 1);
  }
  T::put<uint32_t>(deep, T::U8);
  T::put<uint64_t>(deep, 0);
  g.raw("deep", T::ARRAY, deep);
  expect_error(g.build(), "metadata deep: arrays nested deeper than");

  g = GgufBuilder();
  g.u32("dup", 1).u32("dup", 2);
  expect_error(g.build(), "duplicate metadata key dup");

  g = GgufBuilder();
  g.str("bad\nkey", "v").str("bad\nkey", "v");
  expect_error(g.build(), "duplicate metadata key bad\\x0akey");  // one line, escaped
}

TEST(Gguf, RejectsBadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBuilder g = small_file();
    g.u32("general.alignment", a);
    expect_error(g.build(), "general.alignment " + std::to_string(a));
  }
  GgufBuilder g = small_file();
  g.str("general.alignment", "32");
  expect_error(g.build(), "general.alignment is a string");
}

TEST(Gguf, RejectsBadTensorInfos) {
  GgufBuilder g;
  g.tensor("w", {}, 0, 0);
  expect_error(g.build(), "tensor w: 0 dimensions");
  g = GgufBuilder();
  g.tensor("w", {1, 1, 1, 1, 1}, 0, 4);
  expect_error(g.build(), "tensor w: 5 dimensions");
  g = GgufBuilder();
  g.tensor("w", {4, 0}, 0, 0);
  expect_error(g.build(), "tensor w: dimension 1 is 0");
  g = GgufBuilder();
  g.tensor("w", {4, ~0ull}, 0, 0);
  expect_error(g.build(), "tensor w: dimension 1 is -1");
  g = GgufBuilder();
  g.tensor("w", {1ull << 32, 1ull << 32}, 0, 0);
  expect_error(g.build(), "tensor w: element count overflows");
  g = GgufBuilder();
  g.tensor("w", {1ull << 31, 1ull << 31}, 0, 0);  // fits int64 but not the file
  expect_error(g.build(), "tensor w: 4611686018427387904 F32 elements do not fit");
  g = GgufBuilder();
  g.tensor("w", {48, 2}, 8, 100);
  expect_error(g.build(), "tensor w: row of 48 elements is not a whole number of 32-element Q8_0 blocks");
  g = GgufBuilder();
  g.tensor("w", {256}, 10, 84);  // Q2_K: a real ggml type corvid does not run
  expect_error(g.build(), "tensor w: unsupported ggml type id 10");
  g = GgufBuilder();
  g.tensor("w", {4}, 31, 16);
  expect_error(g.build(), "tensor w: unsupported ggml type id 31");
  g = GgufBuilder();
  g.tensor("w", {4}, 0, 16).tensor("w", {4}, 0, 16);
  expect_error(g.build(), "duplicate tensor name w");
}

TEST(Gguf, RejectsBadTensorData) {
  GgufBuilder g;
  g.tensor("a", {8}, 0, 32).tensor("b", {8}, 0, 32, 16);
  expect_error(g.build(), "tensor b: offset 16 is not a multiple of the alignment 32");
  g = GgufBuilder();
  g.tensor("a", {8}, 0, 32).tensor("b", {8}, 0, 32, 1ull << 40);
  expect_error(g.build(), "tensor b: data [1099511627776, +32) runs past the end of the file");
  g = GgufBuilder();
  g.tensor("a", {8}, 0, 32).tensor("b", {16}, 0, 32, 32);  // 64 bytes claimed, 32 present
  expect_error(g.build(), "tensor b: data [32, +64) runs past the end of the file");
  g = GgufBuilder();
  g.tensor("a", {16}, 0, 64).tensor("b", {8}, 0, 32, 32);
  expect_error(g.build(), "tensors a and b overlap");
  g = GgufBuilder();
  g.tensor("a", {8}, 0, 32);
  Bytes b = g.build();
  b.resize(b.size() - 32);  // data section missing entirely
  expect_error(b, "tensor a");
}

TEST(Gguf, RejectsMisalignedViews) {
  // With general.alignment 1 a tensor can start anywhere; an F32 view must still be
  // 4-byte aligned. Of four consecutive offsets exactly one is.
  int ok = 0;
  for (uint64_t off = 0; off < 4; ++off) {
    GgufBuilder g;
    g.alignment = 1;
    g.u32("general.alignment", 1);
    g.tensor("w", {1}, 0, 4, off);
    try {
      parse(g.build());
      ++ok;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tensor w: data is not 4-byte aligned"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ok, 1);
}

TEST(Gguf, OpenReportsMissingFile) {
  try {
    GgufFile::open("/nonexistent/x.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/nonexistent/x.gguf: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace corvid
