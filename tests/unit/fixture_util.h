// Shared by the parity tests (CPU and CUDA): where the oracle fixtures live, how
// they are read, and the greedy loop both compare with the oracle's continuations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "corvid/engine/session.h"
#include "corvid/engine/runner.h"
#include "ops_test_util.h"

namespace corvid::fixtures {

namespace fs = std::filesystem;

// CORVID_TEST_SOURCE_DIR moves the tree (a build carried to the GPU machine runs in another folder).
inline fs::path source_dir() {
  const char* moved = std::getenv("CORVID_TEST_SOURCE_DIR");
  return moved ? fs::path(moved) : fs::path(CORVID_SOURCE_DIR);
}
inline fs::path fixtures_dir() { return source_dir() / "tests" / "fixtures"; }

inline nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// The tiny transformers-made checkpoints (folders with config.json and oracle.json).
inline std::vector<std::string> tiny_fixtures() {
  std::vector<std::string> names;
  if (!fs::exists(fixtures_dir())) return names;
  for (const auto& e : fs::directory_iterator(fixtures_dir()))
    if (fs::exists(e.path() / "config.json") && fs::exists(e.path() / "oracle.json")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A fixture name as a gtest parameter name.
inline std::string test_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// n greedy tokens after `prompt` (no stop tokens: the oracle ran with EOS off), the
// session's cache in `kv` (with `formats` per layer, the delayed switch at quant_start).
inline std::vector<int32_t> greedy(Runner& model, const std::vector<int32_t>& prompt, int64_t n,
                                   const KvFormat& kv = DType::F32, std::span<const std::optional<KvFormat>> formats = {},
                                   int64_t quant_start = 0) {
  Session session(model, static_cast<int64_t>(prompt.size()) + n + 1, kv, formats, quant_start);
  GenerateOptions opts;
  opts.max_new_tokens = n;
  std::vector<int32_t> out;
  session.generate(prompt, opts, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  return out;
}

// Checks logits [n, vocab] (host) against the oracle's top-k (id, logit) lists of one
// prompt: every listed logit within atol, and our argmax equal to the oracle's wherever
// its top-1 leads by more than atol. Returns the largest difference seen.
inline double expect_top_logits(const Tensor& logits, const nlohmann::json& topk, int64_t vocab, double atol,
                                size_t prompt) {
  double worst = 0;
  for (size_t pos = 0; pos < topk.size(); ++pos) {
    const nlohmann::json& top = topk[pos];
    const float* got = logits.row<float>(static_cast<int64_t>(pos));
    for (const nlohmann::json& pair : top) {
      const double diff = std::abs(got[pair[0].get<int>()] - pair[1].get<double>());
      worst = std::max(worst, diff);
      EXPECT_LE(diff, atol) << "prompt " << prompt << " position " << pos << " token " << pair[0];
    }
    if (top[0][1].get<double>() - top[1][1].get<double>() > atol) {
      EXPECT_EQ(std::max_element(got, got + vocab) - got, top[0][0].get<int64_t>())
          << "prompt " << prompt << " position " << pos;
    }
  }
  return worst;
}

// Appending k tokens in one step (a prefill chunk, speculative verification) gives the
// logits of k one-token steps bit for bit over a cache of format t (with the delayed
// switch at quant_start, when set): a fixed 12-token prompt, its first 4 scored first.
inline void expect_append_equals_one_token_steps(Runner& runner, const KvFormat& t, int64_t quant_start = 0) {
  const int64_t vocab = runner.config().vocab_size;
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 3, 250, 7, 120, 64, 33, 8, 200};
  Session together(runner, 32, t, {}, quant_start), apart(runner, 32, t, {}, quant_start);
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 4), tail(prompt.begin() + 4, prompt.end());
  together.score(head);
  const Tensor& all = together.score(tail);  // 8 positions appended in one step
  std::vector<float> joint(all.ptr<float>(), all.ptr<float>() + all.numel());
  apart.score(head);
  for (size_t i = 0; i < tail.size(); ++i) {
    const Tensor& one = apart.score(std::span<const int32_t>(&tail[i], 1));
    EXPECT_TRUE(testing::bitwise_equal(one.ptr<float>(), joint.data() + static_cast<int64_t>(i) * vocab,
                                       static_cast<size_t>(vocab)))
        << kv_format_name(t) << ": position " << 4 + i;
  }
}

}  // namespace corvid::fixtures
