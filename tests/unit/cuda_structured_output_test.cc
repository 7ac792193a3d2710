// Structured output on the GPU: ops::mask_logits equals the CPU's, and the engine on
// CUDA holds a reply to a JSON schema (masks made beside the step, applied to device
// logits before the device samples).
#include <gtest/gtest.h>

#include <random>

#include "corvid/engine/engine.h"
#include "corvid/engine/loaded_model.h"
#include "corvid/engine/structured_output.h"
#include "corvid/ops/sampling.h"
#include "cuda_test_util.h"
#include "fixture_util.h"

namespace corvid {
namespace {

TEST(CudaStructuredOutput, MaskLogitsEqualsTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 5, vocab = 1000, words = (vocab + 31) / 32;
  std::mt19937 rng(3);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (float& l : logits) l = static_cast<float>(rng() % 1000) / 100.0f;
  const std::vector<int32_t> masked_rows = {4, 1, 2};
  std::vector<int32_t> masks(masked_rows.size() * static_cast<size_t>(words));
  for (int32_t& w : masks) w = static_cast<int32_t>(rng());
  std::vector<float> cpu = logits;
  ops::mask_logits(Tensor(DType::F32, {rows, vocab}, cpu.data()), masked_rows, masks);
  DeviceTensor dev(Device::CUDA, DType::F32, {rows, vocab});
  copy_bytes(dev.tensor.data, Device::CUDA, logits.data(), Device::CPU, logits.size() * sizeof(float));
  ops::mask_logits(dev.tensor, masked_rows, masks);
  std::vector<float> gpu(logits.size());
  copy_bytes(gpu.data(), Device::CPU, dev.tensor.data, Device::CUDA, gpu.size() * sizeof(float));
  EXPECT_EQ(gpu, cpu);
  int masked = 0;
  for (float v : cpu) masked += std::isinf(v);
  EXPECT_GT(masked, 1000);  // about half of three rows
}

TEST(CudaStructuredOutput, EngineHoldsAReplyToASchema) {
  SKIP_WITHOUT_GPU();
  LoadedModel m = LoadedModel::load((fixtures::fixtures_dir() / "llama").string(), Device::CUDA);
  FormatCompiler compiler(*m.tokenizer, m.model->config().vocab_size);
  EngineConfig config;
  config.num_blocks = 256;
  config.block_size = 16;
  Engine engine(*m.runner, m.tokenizer.get(), config);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = m.tokenizer->encode("Item " + std::to_string(i), true);
    r.max_tokens = 48;
    r.sampling.temperature = 0.9f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.ignore_eos = i % 2 == 0;  // free rows run to max_tokens; held ones end at the EOS the format allows
    if (i % 2) r.format = compiler.compile({OutputFormat::Kind::JsonSchema,
                                            R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                "required": ["ok"], "additionalProperties": false})"});
    handles.push_back(engine.submit(std::move(r)));
  }
  for (int i = 1; i < 6; i += 2) {
    const RequestResult r = handles[static_cast<size_t>(i)].wait();
    const nlohmann::json j = nlohmann::json::parse(r.text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.text;
    EXPECT_TRUE(j["ok"].is_boolean()) << r.text;
  }
  for (int i = 0; i < 6; i += 2) EXPECT_EQ(handles[static_cast<size_t>(i)].wait().finish, FinishReason::Length);
}

}  // namespace
}  // namespace corvid
