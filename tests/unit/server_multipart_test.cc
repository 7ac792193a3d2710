// multipart/form-data parsing: the forms real clients send (curl, httpx/openai), binary
// bodies that look like delimiters, repeated fields, and malformed or hostile bodies,
// each refused with a message naming what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "corvid/core/error.h"
#include "corvid/server/multipart.h"

namespace corvid::server {
namespace {

const std::string kB = "X-BOUNDARY";

std::string part(const std::string& headers, const std::string& body) {
  return "--" + kB + "\r\n" + headers + "\r\n\r\n" + body + "\r\n";
}
std::string field(const std::string& name, const std::string& value) {
  return part("Content-Disposition: form-data; name=\"" + name + "\"", value);
}
std::string close() { return "--" + kB + "--\r\n"; }

// The message of the corvid::Error that parsing throws ("" when it does not throw).
std::string error_of(const std::string& body, const MultipartLimits& limits = {}) {
  try {
    parse_multipart(body, kB, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Multipart, BoundaryFromContentType) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data;BOUNDARY=\"a b;c\""), "a b;c");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; boundary=----x--"), "----x--");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"q\\\"x\""), "q\"x");
  EXPECT_THROW(multipart_boundary("application/json"), Error);
  EXPECT_THROW(multipart_boundary("multipart/form-data"), Error);
  EXPECT_THROW(multipart_boundary("multipart/form-data; boundary="), Error);
  EXPECT_THROW(multipart_boundary("multipart/form-data; boundary=\"unterminated"), Error);
  EXPECT_THROW(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'a')), Error);
  EXPECT_NO_THROW(multipart_boundary("multipart/form-data; boundary=" + std::string(70, 'a')));
  try {
    multipart_boundary("multipart/form-data; charset=utf-8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no boundary"), std::string::npos) << e.what();
  }
}

TEST(Multipart, FieldsAndAFileAsClientsSendThem) {
  const std::string body = field("model", "whisper-1") +
                           part("Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                                "Content-Type: audio/wav",
                                "RIFF....WAVE") +
                           field("timestamp_granularities[]", "segment") + field("timestamp_granularities[]", "word") +
                           close();
  const MultipartForm form = parse_multipart(body, kB);
  ASSERT_EQ(form.parts.size(), 4u);
  EXPECT_EQ(form.find("model")->body, "whisper-1");
  EXPECT_FALSE(form.find("model")->has_filename);
  const MultipartPart* file = form.find("file");
  ASSERT_NE(file, nullptr);
  EXPECT_TRUE(file->has_filename);
  EXPECT_EQ(file->filename, "a.wav");
  EXPECT_EQ(file->content_type, "audio/wav");
  EXPECT_EQ(file->body, "RIFF....WAVE");
  const auto granularities = form.all("timestamp_granularities[]");
  ASSERT_EQ(granularities.size(), 2u);
  EXPECT_EQ(granularities[0]->body, "segment");
  EXPECT_EQ(granularities[1]->body, "word");
  EXPECT_EQ(form.find("missing"), nullptr);
}

TEST(Multipart, PreambleEpiloguePaddingAndHeaderCase) {
  const std::string body = "This is the preamble.\r\n--" + kB + " \t\r\n" +
                           "content-disposition: FORM-DATA; filename=x.bin; name=up\r\nX-Other: 1\r\n\r\nv\r\n" +
                           "--" + kB + "--ignored epilogue";
  const MultipartForm form = parse_multipart(body, kB);
  ASSERT_EQ(form.parts.size(), 1u);
  EXPECT_EQ(form.parts[0].name, "up");
  EXPECT_EQ(form.parts[0].filename, "x.bin");
  EXPECT_EQ(form.parts[0].body, "v");
}

TEST(Multipart, BodiesAreBinarySafe) {
  // NULs, bare CR/LF, "--" + boundary without the CRLF before it, and a near miss of the
  // delimiter are all content.
  std::string bytes = std::string("\0\x01\xff\r\n\r\n--X-BOUNDAR\r\n-", 21);
  bytes += "--" + kB + " mid-line";
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  const std::string body = part("Content-Disposition: form-data; name=\"file\"", bytes) + close();  // the parts view it
  const MultipartForm form = parse_multipart(body, kB);
  ASSERT_EQ(form.parts.size(), 1u);
  EXPECT_EQ(form.parts[0].body, bytes);
  // An empty body and a part with an empty value.
  const std::string empty = close(), empty_value = field("a", "") + close();
  EXPECT_TRUE(parse_multipart(empty, kB).parts.empty());
  EXPECT_EQ(parse_multipart(empty_value, kB).parts[0].body, "");
}

TEST(Multipart, MalformedBodiesNameTheProblem) {
  auto has = [](const std::string& message, const char* what) {
    return message.find(what) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of("no boundary here"), "no boundary line")) << error_of("no boundary here");
  EXPECT_TRUE(has(error_of(field("a", "1")), "closing"));                          // no close delimiter
  EXPECT_TRUE(has(error_of(field("a", "1") + "--" + kB), "closing"));              // body ends after a boundary
  EXPECT_TRUE(has(error_of("--" + kB + "\r\nContent-Disposition: form-data; name=a\r\n\r\nvalue"), "closing"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: form-data", "x") + close()), "has no name"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: form-data; name=\"\"", "x") + close()), "has no name"));
  EXPECT_TRUE(has(error_of(part("Content-Type: text/plain", "x") + close()), "no Content-Disposition"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: attachment; name=a", "x") + close()), "not form-data"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: form-data; name=\"a", "x") + close()), "unterminated"));
  EXPECT_TRUE(has(error_of(part("no colon", "x") + close()), "no ':'"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: form-data; name=a\r\n folded", "x") + close()), "folded"));
  EXPECT_TRUE(has(error_of(part("Content-Disposition: form-data; name=a\r\nContent-Disposition: form-data; name=b", "x") +
                           close()),
                  "two Content-Disposition"));
  EXPECT_TRUE(has(error_of("--" + kB + "\r\nContent-Disposition: form-data; name=a"), "does not end"));
  EXPECT_TRUE(has(error_of("--" + kB + "junk\r\n"), "followed by other bytes"));
}

TEST(Multipart, BoundsOnPartsAndHeaders) {
  MultipartLimits limits;
  limits.max_parts = 3;
  limits.max_header_bytes = 100;
  std::string three, four;
  for (int i = 0; i < 3; ++i) three += field("f" + std::to_string(i), "v");
  four = three + field("f3", "v");
  const std::string three_parts = three + close();
  EXPECT_EQ(parse_multipart(three_parts, kB, limits).parts.size(), 3u);
  EXPECT_NE(error_of(four + close(), limits).find("more than 3 parts"), std::string::npos);
  // A header block over the bound is refused after reading only the bound, even when
  // the body never ends it.
  const std::string long_header = "Content-Disposition: form-data; name=a; x=\"" + std::string(200, 'h') + "\"";
  EXPECT_NE(error_of(part(long_header, "v") + close(), limits).find("longer than 100 bytes"), std::string::npos);
  EXPECT_NE(error_of("--" + kB + "\r\n" + std::string(100000, 'h'), limits).find("longer than 100 bytes"),
            std::string::npos);
  // Many tiny parts stop at the part bound, not at memory.
  std::string flood;
  for (int i = 0; i < 10000; ++i) flood += field("a", "");
  EXPECT_NE(error_of(flood + close()).find("more than 64 parts"), std::string::npos);
}

TEST(Multipart, AdversarialDelimiterLookalikesStayLinear) {
  // A body made of delimiter prefixes: every position nearly matches. The scan must stay
  // linear (this finishes at once) and the part's content is all of it.
  std::string lookalikes;
  while (lookalikes.size() < (size_t{4} << 20)) lookalikes += "\r\n--X-BOUNDAR";
  const std::string body = part("Content-Disposition: form-data; name=\"file\"", lookalikes) + close();
  const MultipartForm form = parse_multipart(body, kB);
  EXPECT_EQ(form.parts[0].body.size(), lookalikes.size());
}

}  // namespace
}  // namespace corvid::server
