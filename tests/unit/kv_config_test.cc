// Per-layer KV formats (kv/kv_config.h): the rules a --kv-config file gives become each
// layer's format (first match, negative indices, kinds), malformed files are refused
// with their reason, layers of one kind and format share a group, the pools hold each
// layer in its format (read back from the store), and a mixed-format engine's batched
// steps give a session's tokens over the same formats.
#include <gtest/gtest.h>

#include "corvid/core/error.h"
#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/session.h"
#include "corvid/kv/block_pool.h"
#include "corvid/kv/kv_config.h"
#include "corvid/kv/kv_groups.h"
#include "corvid/kv/kv_manager.h"
#include "fixture_util.h"
#include "engine_runs.h"

namespace corvid {
namespace {

// Six layers: full, sliding 16, full, sliding 16, shared (reads layer 2), full.
std::vector<LayerState> mixed_spec() {
  std::vector<LayerState> s(6, LayerState{StateKind::FullKV, 2, 64});
  s[1].kind = s[3].kind = StateKind::SlidingKV;
  s[1].window = s[3].window = 16;
  s[4].kind = StateKind::SharedKV;
  s[4].source = 2;
  return s;
}

TEST(KvConfig, RulesGiveEachLayerItsFormat) {
  const std::string json = R"({"rules": [{"layers": [0, -1], "format": "f32"},
                                         {"kind": "sliding", "format": "q4"},
                                         {"layers": [2], "kind": "sliding", "format": "q8_g32"},
                                         {"format": "q8"}]})";
  const std::vector<std::optional<KvFormat>> f = kv_layer_formats(json, mixed_spec(), "test.json");
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0], DType::F32);    // the first rule
  EXPECT_EQ(f[1], DType::A4G64);  // sliding
  EXPECT_EQ(f[2], DType::A8G64);  // rule 3 needs a sliding layer 2: the catch-all
  EXPECT_EQ(f[3], DType::A4G64);
  EXPECT_EQ(f[4], std::nullopt);  // shared: stores nothing
  EXPECT_EQ(f[5], DType::F32);    // -1
  // No rule for a layer: it keeps the cache's dtype.
  const auto some = kv_layer_formats(R"({"rules": [{"layers": [3], "format": "q4_g32"}]})", mixed_spec(), "t");
  EXPECT_EQ(some[3], DType::A4G32);
  EXPECT_EQ(some[0], std::nullopt);
}

TEST(KvConfig, MalformedFilesAreRefusedWithTheirReason) {
  const std::vector<LayerState> spec = mixed_spec();
  auto refuses = [&](const std::string& json, const std::string& why) {
    try {
      kv_layer_formats(json, spec, "bad.json");
      ADD_FAILURE() << json << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refuses("{", "not JSON");
  refuses(R"({"layers": []})", "a KV config is");
  refuses(R"({"rules": [{"format": "q3"}]})", "unknown format \"q3\"");
  refuses(R"({"rules": [{"layers": [6], "format": "q8"}]})", "layer 6 is outside");
  refuses(R"({"rules": [{"layers": [-7], "format": "q8"}]})", "layer -7 is outside");
  refuses(R"({"rules": [{"kind": "recurrent", "format": "q8"}]})", "unknown kind");
  refuses(R"({"rules": [{"layer": [1], "format": "q8"}]})", "unknown key \"layer\"");
  refuses(R"({"rules": [{"layers": [0]}]})", "needs a \"format\"");
  refuses(R"({"rules": [], "extra": 1})", "unknown key \"extra\"");
}

TEST(KvConfig, LayersOfOneKindAndFormatShareAGroup) {
  const std::vector<LayerState> spec = with_layer_formats(
      mixed_spec(), kv_layer_formats(R"({"rules": [{"layers": [0, 5], "format": "q4"}]})", mixed_spec(), "t"));
  const KvGrouping g = group_layers(spec);
  // Full groups first (in the order of their first layers), then sliding ones.
  ASSERT_EQ(g.groups.size(), 3u);  // full q4 (0, 5), full (2), sliding 16 (1, 3)
  std::vector<std::string> names;
  for (const KvGroup& group : g.groups) names.push_back(group.name());
  EXPECT_EQ(names, (std::vector<std::string>{"full q4", "full", "sliding 16"}));
  EXPECT_EQ(g.groups[0].layers, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(g.group_of[4], g.group_of[2]);  // the shared layer reads layer 2's group
  // A block of the q4 group takes 36 / 64 of an F32 block's bytes per value.
  EXPECT_EQ(BlockPool::bytes_per_block(g.groups[0].spec, 16, DType::F32), 2 * 2 * 16 * 2 * 36);
  EXPECT_EQ(BlockPool::bytes_per_block(g.groups[1].spec, 16, DType::F32), 2 * 2 * 16 * 64 * 4);
}

// Two full groups (F32 layers and q4 layers) split the budget so that both hold the same
// positions (a position takes a block in each), within the budget.
TEST(KvConfig, FullGroupsOfTwoFormatsHoldTheSamePositions) {
  std::vector<LayerState> spec(4, LayerState{StateKind::FullKV, 2, 64});
  spec[1].format = spec[2].format = KvFormat(DType::A4G64);
  KvManagerConfig c;
  c.block_size = 16;
  c.budget_bytes = int64_t{64} << 20;
  KvManager kv(spec, c);
  const std::vector<KvGroupStats> groups = kv.group_stats();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].blocks_total, groups[1].blocks_total);
  const int64_t per_block = BlockPool::bytes_per_block(spec, 16, DType::F32);  // both groups' layers
  EXPECT_EQ(groups[0].blocks_total, c.budget_bytes / per_block);
  EXPECT_LE(kv.total_bytes(), c.budget_bytes);
  EXPECT_GT(kv.total_bytes(), c.budget_bytes - per_block);
}

// llama_hd64 (2 layers): layer 0 in q4, layer 1 in the cache's F32.
TEST(KvConfig, MixedFormatEngineEqualsSessionAndHoldsEachLayerInItsFormat) {
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama_hd64").string());
  const std::vector<std::optional<KvFormat>> formats =
      kv_layer_formats(R"({"rules": [{"layers": [0], "format": "q4"}]})", m.model->state_spec(), "t");
  const auto prompts = fixtures::random_prompts(5, 5, 21, 400);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(fixtures::greedy(*m.runner, p, 12, DType::F32, formats));
  EngineConfig c;
  c.num_blocks = 128;
  c.block_size = 4;
  c.scheduler = {5, 24};
  c.kv_layer_formats = formats;
  Engine engine(*m.runner, m.tokenizer.get(), c);
  EXPECT_EQ(engine.kv().keys(0).dtype, DType::A4G64);
  EXPECT_EQ(engine.kv().values(0).dtype, DType::A4G64);
  EXPECT_EQ(engine.kv().keys(1).dtype, DType::F32);
  const auto batched = fixtures::engine_greedy(engine, prompts, 12);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
  engine.shutdown();
  // The formats are in effect: the q4 layer moves the logits away from an all-F32 cache's.
  Session mixed(*m.runner, 32, DType::F32, formats), plain(*m.runner, 32, DType::F32);
  const Tensor& a = mixed.score(prompts[0]);
  const std::vector<float> la(a.ptr<float>(), a.ptr<float>() + a.numel());
  const Tensor& b = plain.score(prompts[0]);
  EXPECT_NE(la, std::vector<float>(b.ptr<float>(), b.ptr<float>() + b.numel()));
}

}  // namespace
}  // namespace corvid
