// libFuzzer target: arbitrary bytes as text to encode, and as ids to decode,
// through the three small committed tokenizers (byte-level, SentencePiece-
// style with byte fallback, Metaspace with every added-token flag). Checks
// that streaming decode equals decode, that every streamed piece is valid
// UTF-8, and that encoding never throws. Run from the repository root (as
// scripts/fuzz.sh does) or set CORVID_SOURCE_DIR.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "corvid/tokenizer/tokenizer.h"
#include "corvid/tokenizer/unicode.h"

using namespace corvid;

namespace {

const std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
  static const auto all = [] {
    const char* env = std::getenv("CORVID_SOURCE_DIR");
    std::string dir = std::string(env && *env ? env : ".") + "/tests/tokenizer/synthetic/";
    std::vector<std::unique_ptr<Tokenizer>> v;
    for (const char* name : {"synthetic_bytelevel", "synthetic_spm", "synthetic_meta"}) {
      v.push_back(Tokenizer::from_hf_files(dir + name + ".tokenizer.json", ""));
    }
    return v;
  }();
  return all;
}

void check_stream(const Tokenizer& tk, const std::vector<int32_t>& ids, bool skip) {
  StreamingDetokenizer stream(tk, skip);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    if (!tok::utf8_valid(piece)) std::abort();
    streamed += piece;
  }
  streamed += stream.flush();
  if (streamed != tk.decode(ids, skip) || !tok::utf8_valid(streamed)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tk : tokenizers()) {
    auto ids = tk->encode(text, true);
    for (int32_t id : ids) {
      if (id < 0 || id >= tk->vocab_size()) std::abort();
    }
    check_stream(*tk, ids, false);
    // The same bytes read as ids (some out of range) exercise byte-token runs and specials.
    std::vector<int32_t> raw;
    for (size_t i = 0; i + 1 < size; i += 2) {
      raw.push_back(static_cast<int32_t>(data[i] | (data[i + 1] << 8)) % (tk->vocab_size() + 8) - 4);
    }
    check_stream(*tk, raw, false);
    check_stream(*tk, raw, true);
  }
  return 0;
}
