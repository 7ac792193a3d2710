// The fuzz seed corpora (tests/fuzz/make_corpus.py) are only useful while the
// valid seeds stay valid: then mutations start deep inside the parsers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "corvid/audio/audio_file.h"
#include "corvid/models/registry.h"
#include "corvid//core/error.h"
#include "corvid/formats/ctranslate2.h"
#include "corvid/formats/gguf.h"
#include "corvid/formats/gguf_model.h"
#include "corvid/formats/json_file.h"
#include "corvid/formats/model_config.h"
#include "corvid/formats/safetensors.h"
#include "corvid/server/audio_api.h"
#include "corvid/server/multipart.h"

namespace corvid {
namespace {

const std::string kCorpus = std::string(CORVID_SOURCE_DIR) + "/tests/fuzz/corpus/";

TEST(FuzzSeeds, GgufSeedsParse) {
  for (const char* name : {"every_value_type.gguf", "kquants_v2_align64.gguf", "llama_mixed_types.gguf", "qwen3.gguf"})
    EXPECT_NO_THROW(GgufFile::open(kCorpus + "gguf/" + name)) << name;
  EXPECT_NO_THROW(read_gguf_config(*GgufFile::open(kCorpus + "gguf/llama_mixed_types.gguf")));
  EXPECT_NO_THROW(read_gguf_config(*GgufFile::open(kCorpus + "gguf/qwen3.gguf")));
  // The stories260K header seed has its tensor data cut off on purpose.
  EXPECT_THROW(GgufFile::open(kCorpus + "gguf/stories260K_header.gguf"), Error);
}

TEST(FuzzSeeds, SafetensorsSeedsParse) {
  for (const char* name : {"mixed.safetensors", "other_dtypes.safetensors", "empty.safetensors"})
    EXPECT_NO_THROW(SafetensorsFile::open(kCorpus + "safetensors/" + name)) << name;
  // Without the header padding the reference writer adds, the F32 data is misaligned: it
  // loads from an aligned copy.
  EXPECT_GT(SafetensorsFile::open(kCorpus + "safetensors/unpadded.safetensors")->copied_bytes(), 0u);
}

TEST(FuzzSeeds, ConfigSeedsParse) {
  for (const char* name : {"llama31.json", "mistral.json", "qwen2.json", "qwen3.json"}) {
    std::string path = kCorpus + "model_config/" + name;
    EXPECT_NO_THROW(parse_model_config(read_json_file(path), path)) << name;
  }
  std::string gen = kCorpus + "model_config/generation.json";
  EXPECT_NO_THROW(parse_generation_config(read_json_file(gen), gen));
}

TEST(FuzzSeeds, AudioSeedsDecode) {
  for (const char* name : {"clip.wav", "clip_float.wav", "clip.flac", "clip.ogg", "clip.mp3", "clip.opus"}) {
    const audio::Audio a = audio::read_file(kCorpus + "audio/" + name);
    EXPECT_GT(a.samples.size(), 1000u) << name;
  }
}

TEST(FuzzSeeds, Ctranslate2SeedParses) {
  const auto f = Ct2File::open(kCorpus + "ctranslate2/small.bin");
  EXPECT_EQ(f->variables().size(), 4u);
  EXPECT_EQ(f->scalar("num_heads"), 6);
  EXPECT_NE(f->find("decoder/embeddings/weight"), nullptr);
}

TEST(FuzzSeeds, MultipartSeedsParse) {
  // The first line is the Content-Type header; both forms reach the audio API's fields.
  for (const auto& [name, parts] : {std::pair<const char*, size_t>{"openai_client.txt", 7}, {"curl.txt", 2}}) {
    std::ifstream in(kCorpus + "multipart/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string seed = ss.str();
    const size_t eol = seed.find('\n');
    ASSERT_NE(eol, std::string::npos) << name;
    const std::string_view body = std::string_view(seed).substr(eol + 1);
    const server::MultipartForm form = server::parse_multipart(body, server::multipart_boundary(seed.substr(0, eol)));
    EXPECT_EQ(form.parts.size(), parts) << name;
    EXPECT_NO_THROW(server::parse_audio_request(form, server::kTranscriptionsPath, false)) << name;
  }
}

}  // namespace
}  // namespace corvid
