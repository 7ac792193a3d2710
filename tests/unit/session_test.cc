// Session: continuing a conversation from a re-rendered token sequence.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "corvid/models/registry.h"
#include "corvid//engine/session.h"
#include "model_util.h"
#include "corvid/formats/model_files.h"
#include "corvid/engine/runner.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;

std::vector<int32_t> greedy_run(Session& s, std::span<const int32_t> new_tokens, int64_t n) {
  GenerateOptions opts;
  opts.max_new_tokens = n;
  std::vector<int32_t> out;
  s.generate(new_tokens, opts, [&](int32_t id) { out.push_back(id); return true; });
  return out;
}

TEST(Session, ContinueFromKeepsTheCommonPrefixAndMatchesAFreshSession) {
  ModelFiles files = open_model((fs::path(CORVID_SOURCE_DIR) / "tests" / "fixtures" / "llama").string());
  BoundModel bound(files);
  Runner& model = *bound;
  const std::vector<int32_t> turn1 = {1, 20, 30, 40, 50};
  Session chat(model, 128);
  const auto answer1 = greedy_run(chat, turn1, 6);

  // The next turn's rendering rewrites the tail of the first answer (as a template that
  // drops old reasoning would) and adds new tokens.
  std::vector<int32_t> rendered = turn1;
  rendered.push_back(answer1[0]);
  rendered.push_back(77);
  rendered.push_back(88);
  const auto suffix = chat.continue_from(rendered);
  ASSERT_EQ(suffix, (std::vector<int32_t>{77, 88}));
  ASSERT_EQ(chat.tokens().size(), turn1.size() + 1);
  const auto continued = greedy_run(chat, suffix, 8);

  Session fresh(model, 128);
  EXPECT_EQ(greedy_run(fresh, rendered, 8), continued);

  // A rendering that diverges at the very first token keeps nothing.
  EXPECT_EQ(chat.continue_from(std::vector<int32_t>{5, 6}), (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(chat.tokens().empty());
}

}  // namespace
}  // namespace corvid
