#include <gtest/gtest.h>

#include <cstring>

#include "corvid/core/error.h"
#include "corvid/formats/safetensors.h"
#include "safetensors_builder.h"

namespace corvid {
namespace {

using testing::SafetensorsBuilder;
using testing::ScratchDir;
using Bytes = std::vector<uint8_t>;
using json = nlohmann::json;

std::shared_ptr<SafetensorsFile> parse(const Bytes& b) {
  auto copy = std::make_shared<Bytes>(b);
  return SafetensorsFile::parse(copy, copy->data(), copy->size(), "mem.safetensors");
}

void expect_error(const Bytes& b, const std::string& needle) {
  try {
    parse(b);
    ADD_FAILURE() << "parsed; expected: " << needle;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("mem.safetensors: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected: " << needle;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// Expects `fn` to throw a one-line corvid::Error containing `needle`.
template <class Fn> void expect_throw(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

SafetensorsBuilder small() {
  SafetensorsBuilder s;
  s.add("model.embed_tokens.weight", "F32", {4, 2}, 4).add("model.norm.weight", "BF16", {2}, 2);
  s.add("half", "F16", {2, 1, 1, 2}, 2).add("ids", "I32", {3}, 4);
  s.header["__metadata__"] = {{"format", "pt"}};
  return s;
}

TEST(Safetensors, ParsesValidFile) {
  SafetensorsBuilder s = small();
  s.add("step", "I64", {}, 8).add("empty", "F32", {0, 4}, 4);
  Bytes b = s.build();
  auto f = parse(b);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 6u);
  // tensors() is in data order.
  EXPECT_EQ(f->tensors()[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(f->tensors()[3].name, "ids");

  const SafetensorsTensor* emb = f->find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::F32);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(emb->view.shape_str(), "[4, 2]");
  EXPECT_EQ(emb->begin, 0u);
  EXPECT_EQ(emb->end, 32u);
  const uint8_t* data_start = static_cast<const uint8_t*>(emb->view.data);
  EXPECT_EQ(data_start[5], 5);  // the builder fills data with the byte index
  EXPECT_EQ(f->find("model.norm.weight")->dtype, DType::BF16);
  EXPECT_EQ(static_cast<const uint8_t*>(f->find("model.norm.weight")->view.data) - data_start, 32);
  EXPECT_EQ(f->find("half")->view.ndim, 4);
  EXPECT_EQ(f->find("ids")->dtype, DType::I32);
  const SafetensorsTensor* step = f->find("step");
  ASSERT_NE(step, nullptr);
  EXPECT_FALSE(step->dtype);  // recognised, no corvid DType
  EXPECT_EQ(step->dtype_name, "I64");
  EXPECT_TRUE(step->shape.empty());
  EXPECT_EQ(f->find("empty")->view.numel(), 0);
  EXPECT_EQ(f->find("nope"), nullptr);
}

// A header without padding (older writers) leaves the data unaligned: the tensors are read
// from aligned copies, with the file's values, instead of being refused.
TEST(Safetensors, UnpaddedHeaderLoadsFromAlignedCopies) {
  SafetensorsBuilder s;
  s.add("w", "F32", {2, 3}, 4).add("h", "BF16", {3}, 2).add("ids", "I32", {2}, 4).add("empty", "F32", {0}, 4);
  std::string text = s.header.dump();
  while ((8 + text.size()) % 4 != 1) text += ' ';  // data starts 1 byte past a 4-byte boundary
  const uint64_t n = text.size();
  Bytes b(8 + n + s.next);
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, text.data(), n);
  for (uint64_t i = 0; i < s.next; ++i) b[8 + n + i] = static_cast<uint8_t>(i * 7 + 3);
  auto f = parse(b);
  EXPECT_EQ(f->copied_bytes(), 24u + 6u + 8u);
  for (const char* name : {"w", "h", "ids"}) {
    const SafetensorsTensor* t = f->find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->view.data) % dtype_info(*t->dtype).block_bytes, 0u) << name;
    for (uint64_t i = t->begin; i < t->end; ++i)
      ASSERT_EQ(static_cast<const uint8_t*>(t->view.data)[i - t->begin], static_cast<uint8_t>(i * 7 + 3)) << name;
  }
  // As a checkpoint folder: the weights hold the file's values.
  ScratchDir dir;
  dir.write("model.safetensors", b);
  const WeightSet w = load_safetensors_checkpoint(dir.str());
  const Tensor& wt = w.tensors.at("w");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(wt.data) % 4, 0u);
  EXPECT_EQ(static_cast<const uint8_t*>(wt.data)[5], static_cast<uint8_t>(5 * 7 + 3));
  // A padded file is read in place.
  Bytes padded = small().build();
  auto g = parse(padded);
  EXPECT_EQ(g->copied_bytes(), 0u);
}

TEST(Safetensors, OpensFromDisk) {
  ScratchDir dir;
  dir.write("a.safetensors", small().build());
  auto f = SafetensorsFile::open(dir.file("a.safetensors"));
  EXPECT_EQ(f->path(), dir.file("a.safetensors"));
  EXPECT_EQ(f->tensors().size(), 4u);
  expect_throw([&] { SafetensorsFile::open(dir.file("missing.safetensors")); }, "missing.safetensors: cannot open");
}

TEST(Safetensors, EveryTruncationFailsCleanly) {
  Bytes full = small().build();
  ASSERT_NO_THROW(parse(full));
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_THROW(parse(Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n))), Error) << n;
}

TEST(Safetensors, RejectsBadHeaderLength) {
  expect_error(Bytes{1, 2, 3}, "truncated file: 3 bytes");
  Bytes b = small().build();
  uint64_t huge = b.size();  // one more than is there
  std::memcpy(b.data(), &huge, 8);
  expect_error(b, "header length " + std::to_string(huge) + " runs past the end of the file");
  uint64_t ff = ~0ull;
  std::memcpy(b.data(), &ff, 8);
  expect_error(b, "runs past the end of the file");
  // A header within the file but above the sanity limit.
  Bytes big(SafetensorsFile::kMaxHeaderBytes + 16, ' ');
  uint64_t n = SafetensorsFile::kMaxHeaderBytes + 8;
  std::memcpy(big.data(), &n, 8);
  expect_error(big, "exceeds the 104857600-byte limit");
}

TEST(Safetensors, RejectsBadJson) {
  expect_error(SafetensorsBuilder::image("{\"a\": ", 0), "bad JSON header");
  expect_error(SafetensorsBuilder::image("[1, 2]", 0), "JSON header is not an object");
  expect_error(SafetensorsBuilder::image("{\"t\": 5}", 0), "tensor t: header entry is not an object");
  expect_error(SafetensorsBuilder::image("{\"__metadata__\": [1]}", 0), "__metadata__ is not an object");
  expect_error(SafetensorsBuilder::image("{\"__metadata__\": {\"k\": 1}}", 0), "__metadata__ value of k");
  expect_error(SafetensorsBuilder::image(std::string("{\"a\n\": \x01}"), 0), "bad JSON header");
  EXPECT_NO_THROW(parse(SafetensorsBuilder::image("{}", 0)));
}

TEST(Safetensors, RejectsBadEntries) {
  auto with = [](json entry, uint64_t data = 64) {
    return SafetensorsBuilder::image(json{{"w", entry}}.dump(), data);
  };
  expect_error(with({{"shape", {2}}, {"data_offsets", {0, 8}}}), "tensor w: missing or non-string dtype");
  expect_error(with({{"dtype", "F32"}, {"data_offsets", {0, 8}}}), "tensor w: missing or non-array shape");
  expect_error(with({{"dtype", "F32"}, {"shape", {2}}}), "tensor w: data_offsets must be [begin, end]");
  expect_error(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0}}}), "data_offsets must be");
  expect_error(with({{"dtype", "Q4"}, {"shape", {2}}, {"data_offsets", {0, 8}}}), "tensor w: unknown dtype Q4");
  expect_error(with({{"dtype", "F32"}, {"shape", {1, 1, 1, 1, 2}}, {"data_offsets", {0, 8}}}),
               "tensor w: 5 dimensions (at most 4)");
  expect_error(with({{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}}),
               "tensor w: shape entries must be non-negative integers");
  expect_error(with({{"dtype", "F32"}, {"shape", {2.5}}, {"data_offsets", {0, 8}}}), "shape entries");
  expect_error(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {-8, 0}}}), "data_offsets must be");
  expect_error(with({{"dtype", "F32"}, {"shape", {1ull << 40, 1ull << 40}}, {"data_offsets", {0, 8}}}),
               "tensor w: element count overflows");
  expect_error(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 0}}}),
               "tensor w: data_offsets [8, 0] outside the 64-byte data section");
  expect_error(with({{"dtype", "F32"}, {"shape", {32}}, {"data_offsets", {0, 128}}}),
               "tensor w: data_offsets [0, 128] outside the 64-byte data section");
  expect_error(with({{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}),
               "tensor w: 8 bytes do not match shape [3] of F32 (4 bytes each)");
  expect_error(with({{"dtype", "BF16"}, {"shape", {1ull << 62}}, {"data_offsets", {0, 8}}}),
               "bytes do not match shape");
  // A tensor at an offset that is no multiple of its element size is read from a copy.
  EXPECT_EQ(parse(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {2, 10}}}))->copied_bytes(), 8u);
}

TEST(Safetensors, RejectsOverlaps) {
  json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
            {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}};
  expect_error(SafetensorsBuilder::image(h.dump(), 16), "tensors a and b overlap");
  h["b"]["data_offsets"] = {16, 24};
  EXPECT_NO_THROW(parse(SafetensorsBuilder::image(h.dump(), 24)));
}

// --- checkpoint folders --------------------------------------------------

TEST(SafetensorsCheckpoint, SingleFile) {
  ScratchDir dir;
  dir.write("model.safetensors", small().build());
  WeightSet w = load_safetensors_checkpoint(dir.str());
  EXPECT_EQ(w.tensors.size(), 4u);
  EXPECT_EQ(w.source, dir.file("model.safetensors"));
  EXPECT_EQ(w.owners.size(), 1u);
  EXPECT_EQ(w.get("model.embed_tokens.weight").shape_str(), "[4, 2]");
  EXPECT_EQ(w.get("model.norm.weight").dtype, DType::BF16);
}

TEST(SafetensorsCheckpoint, RejectsUnusableDtype) {
  ScratchDir dir;
  SafetensorsBuilder s = small();
  s.add("model.layers.0.weird", "I64", {2}, 8);
  dir.write("model.safetensors", s.build());
  expect_throw([&] { load_safetensors_checkpoint(dir.str()); },
               "model.safetensors: tensor model.layers.0.weird has dtype I64, which corvid cannot use as a weight");
}

TEST(SafetensorsCheckpoint, EmptyFolder) {
  ScratchDir dir;
  expect_throw([&] { load_safetensors_checkpoint(dir.str()); },
               dir.str() + ": no model.safetensors or model.safetensors.index.json");
}

struct Sharded {
  ScratchDir dir;
  json index;
  Sharded() {
    SafetensorsBuilder a, b;
    a.add("model.embed_tokens.weight", "F32", {4, 2}, 4).add("model.layers.0.mlp.up_proj.weight", "F16", {2, 2}, 2);
    b.add("model.norm.weight", "BF16", {2}, 2).add("lm_head.weight", "F32", {4, 2}, 4);
    dir.write("model-00001-of-00002.safetensors", a.build());
    dir.write("model-00002-of-00002.safetensors", b.build());
    index = {{"metadata", {{"total_size", 76}}},
             {"weight_map",
              {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
               {"model.layers.0.mlp.up_proj.weight", "model-00001-of-00002.safetensors"},
               {"model.norm.weight", "model-00002-of-00002.safetensors"},
               {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  }
  void write_index() const { dir.write("model.safetensors.index.json", index.dump(2)); }
  std::string index_path() const { return dir.file("model.safetensors.index.json"); }
};

TEST(SafetensorsCheckpoint, Sharded) {
  Sharded s;
  s.write_index();
  WeightSet w = load_safetensors_checkpoint(s.dir.str());
  EXPECT_EQ(w.tensors.size(), 4u);
  EXPECT_EQ(w.owners.size(), 2u);
  EXPECT_EQ(w.source, s.dir.str());
  EXPECT_EQ(w.get("lm_head.weight").shape_str(), "[4, 2]");
  EXPECT_EQ(w.get("model.layers.0.mlp.up_proj.weight").dtype, DType::F16);
}

TEST(SafetensorsCheckpoint, ShardErrors) {
  {
    Sharded s;
    s.index["weight_map"]["extra.weight"] = "model-00003-of-00003.safetensors";
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); },
                 s.index_path() + ": shard model-00003-of-00003.safetensors does not exist");
  }
  {
    Sharded s;
    s.index["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors";
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); },
                 s.index_path() + ": tensor lm_head.weight is not in shard model-00001-of-00002.safetensors");
  }
  {
    Sharded s;
    s.index["weight_map"]["lm_head.weight"] = "../model-00002-of-00002.safetensors";
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, "is not a file name in the checkpoint folder");
  }
  {
    Sharded s;
    s.index["weight_map"]["lm_head.weight"] = 3;
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, "weight_map entry lm_head.weight is not a string");
  }
  {
    Sharded s;
    s.index.erase("weight_map");
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, "no weight_map object");
  }
  {
    Sharded s;
    s.index["weight_map"] = json::object();
    s.write_index();
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, "weight_map is empty");
  }
  {
    Sharded s;
    s.dir.write("model.safetensors.index.json", std::string("{\"weight_map\": "));
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, s.index_path() + ": bad JSON");
  }
  {
    // A shard that is itself corrupt reports the shard's path.
    Sharded s;
    s.write_index();
    s.dir.write("model-00002-of-00002.safetensors", Bytes{1, 0, 0});
    expect_throw([&] { load_safetensors_checkpoint(s.dir.str()); }, "model-00002-of-00002.safetensors: truncated file");
  }
  {
    // The same tensor in two shards, only one of them named by the index.
    Sharded s;
    s.write_index();
    SafetensorsBuilder b;
    b.add("model.norm.weight", "BF16", {2}, 2).add("lm_head.weight", "F32", {4, 2}, 4);
    b.add("model.embed_tokens.weight", "F32", {4, 2}, 4).add("only.here", "F32", {1}, 4);
    s.dir.write("model-00002-of-00002.safetensors", b.build());
    WeightSet w = load_safetensors_checkpoint(s.dir.str());  // the index decides; extras are kept
    EXPECT_TRUE(w.has("only.here"));
    EXPECT_EQ(w.tensors.size(), 5u);
  }
}

}  // namespace
}  // namespace corvid
