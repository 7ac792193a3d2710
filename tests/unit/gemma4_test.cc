// Gemma 4 beyond its oracle fixture (TinyParity): the per-layer state it declares
// (two head geometries, KV-shared layers reading the last earlier layer of their type),
// that shared layers store nothing in either KV store, and configs it must refuse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "corvid/core/device.h"
#include "corvid/core/error.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/kv/kv_cache.h"
#include "corvid/kv/kv_manager.h"
#include "corvid/models/registry.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using fixtures::fixtures_dir;
using fixtures::read_json;

json gemma4_config() { return read_json(fixtures_dir() / "gemma4" / "config.json"); }

// The fixture's weights under a changed config.json, in a fresh folder.
fs::path with_config(const json& config, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("corvid_gemma4_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    fs::copy_file(fixtures_dir() / "gemma4" / f, dir / f);
  std::ofstream(dir / "config.json") << config.dump();
  return dir;
}

TEST(Gemma4, DeclaresTwoGeometriesAndSharedLayers) {
  LoadedModel m = LoadedModel::load((fixtures_dir() / "gemma4").string());
  const std::vector<LayerState>& spec = m.model->state_spec();
  ASSERT_EQ(spec.size(), 5u);  // sliding, full, sliding, sliding (shared), full (shared)
  EXPECT_EQ(spec[0].kind, StateKind::SlidingKV);
  EXPECT_EQ(spec[0].window, 16);
  EXPECT_EQ(spec[0].head_dim, 16);
  EXPECT_EQ(spec[0].kv_heads, 2);
  EXPECT_EQ(spec[1].kind, StateKind::FullKV);
  EXPECT_EQ(spec[1].head_dim, 32);  // global_head_dim
  EXPECT_EQ(spec[1].kv_heads, 1);   // num_global_key_value_heads (attention_k_eq_v)
  EXPECT_EQ(spec[3].kind, StateKind::SharedKV);
  EXPECT_EQ(spec[3].source, 2);  // the last sliding layer before the shared ones
  EXPECT_EQ(spec[4].kind, StateKind::SharedKV);
  EXPECT_EQ(spec[4].source, 1);  // the last full one
  // Shared layers take no storage: both stores alias their sources' keys and values.
  KVCache cache(spec, 8);
  EXPECT_EQ(cache.keys(3).data, cache.keys(2).data);
  EXPECT_EQ(cache.values(4).data, cache.values(1).data);
  KvManagerConfig kc;
  kc.block_size = 4;
  kc.num_blocks = 16;
  kc.max_chunk = 16;
  KvManager kv(spec, kc);
  ASSERT_EQ(kv.num_groups(), 2);
  EXPECT_EQ(kv.groups()[0].layers, (std::vector<int64_t>{1}));
  EXPECT_EQ(kv.groups()[1].layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(kv.group_of(4), 0);
  EXPECT_EQ(kv.keys(3).data, kv.keys(2).data);
  EXPECT_EQ(cache.nbytes(), static_cast<size_t>(8 * 4 * (2 * 2 * 16 + 1 * 2 * 32 + 2 * 2 * 16)));
}

void expect_config_error(const json& config, const std::string& needle) {
  try {
    read_model_config(config, "g/config.json");
    ADD_FAILURE() << "no error; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void expect_load_error(const json& config, const std::string& name, const std::string& needle) {
  const fs::path dir = with_config(config, name);
  try {
    LoadedModel::load(dir.string());
    ADD_FAILURE() << "no error; expected: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  fs::remove_all(dir);
}

TEST(Gemma4, RefusesWhatItDoesNotRun) {
  json c = gemma4_config();
  c["enable_moe_block"] = true;
  expect_config_error(c, "MoE block (enable_moe_block) is not supported yet");
  c = gemma4_config();
  c["use_bidirectional_attention"] = "all";
  expect_config_error(c, "use_bidirectional_attention \"all\" is not supported");
  c = gemma4_config();
  c["attention_bias"] = true;
  expect_config_error(c, "attention_bias is not supported");
  c = gemma4_config();
  c["layer_types"][2] = "chunked_attention";
  expect_config_error(c, "layer type 'chunked_attention' is not one of Gemma 4's");
  c = gemma4_config();
  c["use_bidirectional_attention"] = "vision";  // image spans only: a text model runs causally
  EXPECT_NO_THROW(read_model_config(c, "g/config.json"));

  c = gemma4_config();
  c["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
  expect_load_error(c, "yarn", "rope_type 'yarn' is not supported for Gemma 4");
  c = gemma4_config();
  c["num_kv_shared_layers"] = 5;
  expect_load_error(c, "shared", "num_kv_shared_layers 5 must be below num_hidden_layers 5");
  c = gemma4_config();
  c["num_kv_shared_layers"] = 1;  // layer 4 then has k_proj in its config but none in the file
  expect_load_error(c, "missing", "model.layers.3.self_attn.k_proj.weight");
  c = gemma4_config();
  c["hidden_size_per_layer_input"] = 0;  // no PLE: the file's PLE tensors are unused
  expect_load_error(c, "unused", "embed_tokens_per_layer");
}

TEST(Gemma4, ProfileNamesItsNeedsBeforeAnyWeight) {
  const json j = gemma4_config();
  const ModelConfig c = read_model_config(j, "g/config.json");
  const ModelProfile p = model_profile(c, FamilySource{&j, nullptr, "g/config.json"});
  EXPECT_EQ(p.family, "gemma4");
  EXPECT_EQ(p.max_head_dim, 32);  // global_head_dim, beyond the config's head_dim 16
  EXPECT_TRUE(p.sliding_window);
  EXPECT_TRUE(p.shared_kv);
  EXPECT_NE(p.fidelity.find("transformers"), std::string::npos);
  EXPECT_NO_THROW(check_profile_on(p, Device::CPU, "g"));
}

// The gemma4 fixture as llama.cpp's converter lays Gemma 4 out in GGUF (its logits:
// GgufFixtureParity): the per-layer arrays, the missing attn_v of attention_k_eq_v and the
// shared layers come back as the same state spec as from config.json.
TEST(Gemma4, GgufDeclaresTheSameLayerState) {
  LoadedModel gguf = LoadedModel::load((fixtures_dir() / "gemma4_gguf" / "model.gguf").string());
  LoadedModel hf = LoadedModel::load((fixtures_dir() / "gemma4").string());
  const std::vector<LayerState>& a = gguf.model->state_spec();
  const std::vector<LayerState>& b = hf.model->state_spec();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kind, b[i].kind) << i;
    EXPECT_EQ(a[i].head_dim, b[i].head_dim) << i;
    EXPECT_EQ(a[i].kv_heads, b[i].kv_heads) << i;
    EXPECT_EQ(a[i].window, b[i].window) << i;
    EXPECT_EQ(a[i].source, b[i].source) << i;
  }
}

// The GPU's attention takes heads of up to 512 (Gemma 4's full layers); a config with
// wider ones is refused on a CUDA load before a weight is read (the fixture's weights do
// not even have that shape).
TEST(CudaGemma4, WiderHeadsThanTheKernelsTakeAreRefusedUpFront) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  json c = gemma4_config();
  c["global_head_dim"] = 1024;
  const fs::path dir = with_config(c, "wide");
  try {
    LoadedModel::load(dir.string(), Device::CUDA);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs attention over heads of 1024"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace corvid
