// CTranslate2's model.bin reader on images written here: variables of each dtype,
// aliases and integer scalars read back; every malformed image (each truncation, bad
// versions, dtypes, byte counts, shapes that overflow, duplicate names, dangling
// aliases, trailing bytes) refused with a corvid::Error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/formats/ctranslate2.h"

namespace corvid {
namespace {

class Image {
 public:
  explicit Image(uint32_t version = 6) {
    u32(version);
    str("WhisperSpec");
    u32(3);  // spec revision
  }
  template <class T> void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void u32(uint32_t v) { put(v); }
  void str(const std::string& s) {
    put(static_cast<uint16_t>(s.size() + 1));
    bytes.insert(bytes.end(), s.begin(), s.end());
    bytes.push_back(0);
  }
  void variable(const std::string& name, const std::vector<uint32_t>& dims, uint8_t dtype, uint32_t nbytes,
                uint8_t fill = 1) {
    str(name);
    put(static_cast<uint8_t>(dims.size()));
    for (uint32_t d : dims) u32(d);
    put(dtype);
    u32(nbytes);
    bytes.insert(bytes.end(), nbytes, fill);
  }
  std::vector<uint8_t> bytes;
};

// Two variables (an F16 matrix and an int8 scalar), one alias.
std::vector<uint8_t> good_image() {
  Image im;
  im.u32(3);
  im.variable("encoder/conv1/weight", {2, 3}, 4, 12);
  im.variable("num_heads", {}, 1, 1, 6);
  im.variable("positions", {4}, 0, 16);
  im.u32(1);
  im.str("decoder/embeddings/weight");
  im.str("encoder/conv1/weight");
  return im.bytes;
}

std::shared_ptr<Ct2File> parse(const std::vector<uint8_t>& bytes) { return Ct2File::parse(bytes, "test.bin"); }

TEST(Ctranslate2, ReadsVariablesAliasesAndScalars) {
  const auto f = parse(good_image());
  EXPECT_EQ(f->spec(), "WhisperSpec");
  EXPECT_EQ(f->version(), 6u);
  ASSERT_EQ(f->variables().size(), 3u);
  const Ct2Variable* w = f->find("encoder/conv1/weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->view.dtype, DType::F16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->view.data) % 64, 0u);  // copied to aligned memory
  EXPECT_EQ(static_cast<const uint8_t*>(w->view.data)[11], 1);
  EXPECT_EQ(f->find("decoder/embeddings/weight"), w);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_EQ(f->scalar("num_heads"), 6);
  EXPECT_THROW(f->scalar("positions"), Error);  // not a scalar
  EXPECT_THROW(f->scalar("missing"), Error);
}

TEST(Ctranslate2, EveryTruncationIsAnError) {
  const std::vector<uint8_t> good = good_image();
  for (size_t n = 0; n < good.size(); ++n) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), Error) << n << " of " << good.size() << " bytes";
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_THROW(parse(longer), Error);  // bytes after the aliases
}

TEST(Ctranslate2, MalformedHeadersAndVariablesAreRefused) {
  auto one = [](auto&& write) {
    Image im;
    im.u32(1);
    write(im);
    im.u32(0);  // no aliases
    return im.bytes;
  };
  EXPECT_NO_THROW(parse(one([](Image& im) { im.variable("a", {2}, 0, 8); })));
  for (uint32_t version : {0u, 3u, 7u}) {
    Image im(version);
    im.u32(0);
    im.u32(0);
    EXPECT_THROW(parse(im.bytes), Error) << version;
  }
  EXPECT_THROW(parse(one([](Image& im) { im.variable("a", {2}, 9, 8); })), Error);  // unknown dtype
  EXPECT_THROW(parse(one([](Image& im) { im.variable("a", {2}, 0, 4); })), Error);  // bytes != shape
  EXPECT_THROW(parse(one([](Image& im) { im.variable("a", {1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 4); })), Error);  // rank
  // 2^40 elements times 2^32 wraps to 2^8 in 64 bits: the shape must still be refused.
  EXPECT_THROW(parse(one([](Image& im) { im.variable("a", {1u << 20, 1u << 20, 0x80000000u, 2}, 1, 256); })), Error);
  EXPECT_THROW(parse(one([](Image& im) { im.variable("a", {0xffffffffu, 0xffffffffu}, 0, 4); })), Error);
  {  // a string without its NUL, and one of length 0
    Image im;
    im.u32(1);
    im.put(static_cast<uint16_t>(1));
    im.put(static_cast<uint8_t>('x'));
    EXPECT_THROW(parse(im.bytes), Error);
    Image z;
    z.u32(1);
    z.put(static_cast<uint16_t>(0));
    EXPECT_THROW(parse(z.bytes), Error);
  }
  {  // a name twice
    Image im;
    im.u32(2);
    im.variable("a", {1}, 0, 4);
    im.variable("a", {1}, 0, 4);
    im.u32(0);
    EXPECT_THROW(parse(im.bytes), Error);
  }
  {  // an alias of nothing
    Image im;
    im.u32(0);
    im.u32(1);
    im.str("b");
    im.str("missing");
    EXPECT_THROW(parse(im.bytes), Error);
  }
  {  // a huge variable count with nothing behind it
    Image im;
    im.u32(0xffffffffu);
    EXPECT_THROW(parse(im.bytes), Error);
  }
}

}  // namespace
}  // namespace corvid
