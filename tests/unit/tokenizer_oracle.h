// Shared helpers for the tokenizer tests: locating test data and comparing a
// Tokenizer against the fixtures that tests/tokenizer/make_expected.py wrote
// with Hugging Face `tokenizers`.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "corvid/tokenizer/tokenizer.h"
#include "corvid/tokenizer/unicode.h"

namespace corvid::testing {

inline std::string source_dir() { return CORVID_SOURCE_DIR; }

// The shared test-data folder: $CORVID_SHARED_DIR, else ../shared or ./shared beside the sources.
inline std::optional<std::string> shared_dir() {
  if (const char* env = std::getenv("CORVID_SHARED_DIR"); env && *env) return std::string(env);
  for (const char* rel : {"/../shared", "/shared"}) {
    std::string p = source_dir() + rel;
    if (std::filesystem::is_directory(p)) return p;
  }
  return std::nullopt;
}

// Path of a file under the shared folder, or nullopt when it is absent.
inline std::optional<std::string> shared_file(const std::string& rel) {
  auto dir = shared_dir();
  if (!dir) return std::nullopt;
  std::string p = *dir + "/" + rel;
  if (!std::filesystem::exists(p)) return std::nullopt;
  return p;
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream buf;
  buf << in.rdbuf();
  return nlohmann::json::parse(buf.str());
}

inline std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

inline std::string ids_text(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

struct OracleReport {
  size_t strings = 0, encode_mismatches = 0, decode_mismatches = 0, stream_mismatches = 0, random_mismatches = 0;
};

// Decodes ids with a StreamingDetokenizer; every piece must be valid UTF-8.
inline std::string stream_decode(const Tokenizer& tk, const std::vector<int32_t>& ids, bool skip, bool* pieces_ok) {
  StreamingDetokenizer stream(tk, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    if (!tok::utf8_valid(piece)) *pieces_ok = false;
    out += piece;
  }
  std::string tail = stream.flush();
  if (!tok::utf8_valid(tail)) *pieces_ok = false;
  return out + tail;
}

// Compares `tk` with tests/tokenizer/expected/<name>.json over the corpus.
// Reports the first few mismatches of each kind in full (string and ids).
inline OracleReport check_against_oracle(const Tokenizer& tk, const std::string& name) {
  const std::string dir = source_dir() + "/tests/tokenizer/";
  const auto corpus = read_json_file(dir + "corpus.json").at("strings").get<std::vector<std::string>>();
  const auto exp = read_json_file(dir + "expected/" + name + ".json");
  const auto prefix = exp.at("prefix").get<std::vector<int32_t>>();
  const auto suffix = exp.at("suffix").get<std::vector<int32_t>>();
  const auto& all_ids = exp.at("ids");
  const auto& with_special = exp.at("with_special");
  const auto& decodes = exp.at("decode");
  // Synthetic tokenizers cover a prefix of the corpus only.
  EXPECT_LE(all_ids.size(), corpus.size()) << name << ": fixture and corpus disagree; rerun make_expected.py";

  OracleReport r;
  constexpr size_t kShow = 3;
  for (size_t i = 0; i < corpus.size() && i < all_ids.size(); ++i) {
    const std::string& s = corpus[i];
    const auto want = all_ids[i].get<std::vector<int32_t>>();
    ++r.strings;
    auto got = tk.encode(s, false);
    if (got != want && r.encode_mismatches++ < kShow) {
      ADD_FAILURE() << name << ": encode mismatch for string #" << i << " " << quoted(s) << "\n  expected "
                    << ids_text(want) << "\n  got      " << ids_text(got);
    }
    std::vector<int32_t> want_full = prefix;
    want_full.insert(want_full.end(), want.begin(), want.end());
    want_full.insert(want_full.end(), suffix.begin(), suffix.end());
    if (auto key = std::to_string(i); with_special.contains(key)) {
      want_full = with_special[key].get<std::vector<int32_t>>();
    }
    auto got_full = tk.encode(s, true);
    if (got_full != want_full && r.encode_mismatches++ < kShow) {
      ADD_FAILURE() << name << ": encode(add_special_tokens) mismatch for string #" << i << " " << quoted(s)
                    << "\n  expected " << ids_text(want_full) << "\n  got      " << ids_text(got_full);
    }

    if (decodes[i].is_number()) continue;  // the oracle itself failed to decode these ids
    std::string d = s, ds = s;
    if (!decodes[i].is_null()) {
      d = decodes[i][0].get<std::string>();
      ds = decodes[i][1].is_null() ? d : decodes[i][1].get<std::string>();
    }
    for (bool skip : {false, true}) {
      const std::string& expect = skip ? ds : d;
      std::string got_text = tk.decode(want, skip);
      if (got_text != expect && r.decode_mismatches++ < kShow) {
        ADD_FAILURE() << name << ": decode(skip_special=" << skip << ") mismatch for ids " << ids_text(want)
                      << " of string #" << i << "\n  expected " << quoted(expect) << "\n  got      "
                      << quoted(got_text);
      }
      bool ok = true;
      std::string streamed = stream_decode(tk, want, skip, &ok);
      if ((streamed != expect || !ok) && r.stream_mismatches++ < kShow) {
        ADD_FAILURE() << name << ": streaming decode (skip_special=" << skip << ") mismatch for string #" << i
                      << (ok ? "" : " (a piece was not valid UTF-8)") << "\n  expected " << quoted(expect)
                      << "\n  got      " << quoted(streamed);
      }
    }
  }

  for (const auto& rnd : exp.at("random")) {
    const auto ids = rnd.at(0).get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      const std::string expect = rnd.at(skip ? 2 : 1).get<std::string>();
      std::string got_text = tk.decode(ids, skip);
      bool ok = true;
      std::string streamed = stream_decode(tk, ids, skip, &ok);
      if ((got_text != expect || streamed != expect || !ok) && r.random_mismatches++ < kShow) {
        ADD_FAILURE() << name << ": decode of random ids " << ids_text(ids) << " (skip_special=" << skip
                      << ")\n  expected " << quoted(expect) << "\n  got      " << quoted(got_text)
                      << "\n  streamed " << quoted(streamed);
      }
    }
  }
  std::cout << "[ oracle   ] " << name << ": " << r.strings << " strings, " << r.encode_mismatches
            << " encode mismatches, " << r.decode_mismatches << " decode mismatches, " << r.stream_mismatches
            << " streaming mismatches, " << exp.at("random").size() << " random id sequences, "
            << r.random_mismatches << " mismatches\n";
  return r;
}

}  // namespace corvid::testing
