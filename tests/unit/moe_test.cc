// The MoE ops (ops/moe.h) on the CPU: the router's top-k (order, ties, renormalisation),
// the experts against a direct per-token sum, batch invariance, bad ids, and the
// profile that refuses a MoE model on a device without the kernels before any weight.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "corvid/core/error.h"
#include "corvid/models/registry.h"
#include "corvid/ops/moe.h"
#include "fixture_util.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using testing::random_floats;

struct Routed {
  std::vector<float> weights;
  std::vector<int32_t> ids;
};

Routed route(std::vector<float> logits, int64_t n, int64_t k, bool norm) {
  const int64_t E = static_cast<int64_t>(logits.size()) / n;
  Routed r{std::vector<float>(static_cast<size_t>(n * k)), std::vector<int32_t>(static_cast<size_t>(n * k))};
  ops::moe_route(Tensor(DType::F32, {n, E}, logits.data()), norm, Tensor(DType::F32, {n, k}, r.weights.data()),
                 Tensor(DType::I32, {n, k}, r.ids.data()));
  return r;
}

TEST(MoeRoute, TopKOfTheSoftmaxInDescendingOrder) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  const Routed r = route(logits, 1, 2, false);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  double sum = 0;
  for (float l : logits) sum += std::exp(l);
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / sum, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(1.0) / sum, 1e-6);
  const Routed n = route(logits, 1, 2, true);
  EXPECT_NEAR(n.weights[0] + n.weights[1], 1.0, 1e-6);
  EXPECT_NEAR(n.weights[0] / n.weights[1], std::exp(1.0), 1e-5);
}

TEST(MoeRoute, EqualProbabilitiesGoToTheLowerIndex) {
  EXPECT_EQ(route({0.3f, 0.7f, 0.7f, 0.7f, 0.1f}, 1, 2, false).ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(route(std::vector<float>(16, 0.0f), 1, 4, true).ids, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(MoeRoute, RefusesATopKBeyondTheExperts) {
  std::vector<float> l(4), w(5);
  std::vector<int32_t> id(5);
  EXPECT_THROW(ops::moe_route(Tensor(DType::F32, {1, 4}, l.data()), false, Tensor(DType::F32, {1, 5}, w.data()),
                              Tensor(DType::I32, {1, 5}, id.data())),
               Error);
}

// E experts of gate/up [I, H] and down [H, I] (F32), stacked as transformers 5 fuses them.
struct ExpertWeights {
  int64_t E, H, I;
  std::vector<float> gate_up, down;
  ops::Experts experts() {
    ops::Experts e;
    e.count = E, e.ffn = I;
    e.gate = {Tensor(DType::F32, {E * 2 * I, H}, gate_up.data()), I, 2 * I, 0, {}};
    e.up = {Tensor(DType::F32, {E * 2 * I, H}, gate_up.data()), I, 2 * I, I, {}};
    e.down = {Tensor(DType::F32, {E * H, I}, down.data()), H, H, 0, {}};
    return e;
  }
};

// out [n, H] of moe_experts over x [n, H] with the given routing (in_place: out is x).
std::vector<float> run_experts(ExpertWeights& w, const std::vector<float>& x, const std::vector<int32_t>& ids,
                               const std::vector<float>& weights, int64_t k, bool in_place = false) {
  const int64_t n = static_cast<int64_t>(x.size()) / w.H;
  std::vector<float> out(x.size()), sx(static_cast<size_t>(n * k * w.H)), act(static_cast<size_t>(n * k * w.I)),
      up(act.size()), y(sx.size());
  const ops::MoeScratch s{Tensor(DType::F32, {n * k, w.H}, sx.data()), Tensor(DType::F32, {n * k, w.I}, act.data()),
                          Tensor(DType::F32, {n * k, w.I}, up.data()), Tensor(DType::F32, {n * k, w.H}, y.data()),
                          Tensor()};
  std::vector<float> xc = x, wc = weights;
  std::vector<int32_t> ic = ids;
  ops::moe_experts(Tensor(DType::F32, {n, w.H}, xc.data()), w.experts(), Tensor(DType::I32, {n, k}, ic.data()),
                   Tensor(DType::F32, {n, k}, wc.data()), ops::GatedActivation::Silu, s,
                   Tensor(DType::F32, {n, w.H}, in_place ? xc.data() : out.data()));
  return in_place ? xc : out;
}

TEST(MoeExperts, EqualsEachTokensWeightedSumOfItsExperts) {
  ExpertWeights w{5, 32, 16, random_floats(5 * 2 * 16 * 32, 1, 0.2f), random_floats(5 * 32 * 16, 2, 0.2f)};
  const int64_t n = 3, k = 2;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * w.H), 3);
  const std::vector<int32_t> ids = {4, 0, 0, 2, 4, 1};
  const std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.25f, 1.0f, -0.5f};
  const std::vector<float> out = run_experts(w, x, ids, weights, k);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < w.H; ++c) {
      double want = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = ids[static_cast<size_t>(t * k + j)];
        double y = 0;
        for (int64_t i = 0; i < w.I; ++i) {
          double g = 0, u = 0;
          for (int64_t h = 0; h < w.H; ++h) {
            const double xv = x[static_cast<size_t>(t * w.H + h)];
            g += xv * w.gate_up[static_cast<size_t>((e * 2 * w.I + i) * w.H + h)];
            u += xv * w.gate_up[static_cast<size_t>((e * 2 * w.I + w.I + i) * w.H + h)];
          }
          y += g / (1 + std::exp(-g)) * u * w.down[static_cast<size_t>((e * w.H + c) * w.I + i)];
        }
        want += weights[static_cast<size_t>(t * k + j)] * y;
      }
      EXPECT_NEAR(out[static_cast<size_t>(t * w.H + c)], want, 1e-4) << "token " << t << " column " << c;
    }
}

// The block writes its output over its input when it has no shared expert.
TEST(MoeExperts, OutMayBeX) {
  ExpertWeights w{4, 64, 32, random_floats(4 * 2 * 32 * 64, 8, 0.2f), random_floats(4 * 64 * 32, 9, 0.2f)};
  const int64_t k = 2, n = 5;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * w.H), 10);
  const std::vector<int32_t> ids = {1, 3, 3, 1, 0, 1, 1, 2, 3, 0};
  const std::vector<float> weights = random_floats(static_cast<size_t>(n * k), 11);
  EXPECT_EQ(run_experts(w, x, ids, weights, k, true), run_experts(w, x, ids, weights, k));
}

TEST(MoeExperts, ATokensOutputDoesNotDependOnWhoSharesItsExperts) {
  ExpertWeights w{4, 64, 32, random_floats(4 * 2 * 32 * 64, 4, 0.2f), random_floats(4 * 64 * 32, 5, 0.2f)};
  const int64_t k = 2, n = 6;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * w.H), 6);
  const std::vector<int32_t> ids = {1, 3, 3, 1, 0, 1, 1, 2, 3, 0, 2, 1};
  const std::vector<float> weights = random_floats(static_cast<size_t>(n * k), 7);
  const std::vector<float> all = run_experts(w, x, ids, weights, k);
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> xt(x.begin() + t * w.H, x.begin() + (t + 1) * w.H);
    const std::vector<int32_t> it(ids.begin() + t * k, ids.begin() + (t + 1) * k);
    const std::vector<float> wt(weights.begin() + t * k, weights.begin() + (t + 1) * k);
    const std::vector<float> alone = run_experts(w, xt, it, wt, k);
    for (int64_t c = 0; c < w.H; ++c)
      ASSERT_EQ(alone[static_cast<size_t>(c)], all[static_cast<size_t>(t * w.H + c)]) << "token " << t;
  }
}

TEST(MoeExperts, AnExpertIdOutsideTheExpertsIsAnError) {
  ExpertWeights w{4, 32, 32, random_floats(4 * 2 * 32 * 32, 8), random_floats(4 * 32 * 32, 9)};
  const std::vector<float> x = random_floats(32, 10);
  try {
    run_experts(w, x, {1, 4}, {0.5f, 0.5f}, 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert id 4 outside [0, 4)"), std::string::npos) << e.what();
  }
}

// The profile refuses a MoE model before its weights on a device without the MoE kernels:
// CUDA in a build without it (a CUDA build runs them).
TEST(MoeProfile, AMoeModelIsRefusedUpFrontWhereTheKernelsAreMissing) {
  const nlohmann::json j = fixtures::read_json(fixtures::fixtures_dir() / "qwen2_moe" / "config.json");
  const ModelConfig c = read_model_config(j, "q/config.json");
  const ModelProfile p = model_profile(c, FamilySource{&j, nullptr, "q/config.json"});
  EXPECT_TRUE(p.routed_experts);
  EXPECT_NO_THROW(check_profile_on(p, Device::CPU, "q"));
#ifdef CORVID_HAVE_CUDA
  EXPECT_TRUE(ops::moe_supported(Device::CUDA));
#else
  EXPECT_FALSE(ops::moe_supported(Device::CUDA));
  try {
    check_profile_on(p, Device::CUDA, "q");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts layers, which do not run on"), std::string::npos)
        << e.what();
  }
#endif
}

}  // namespace
}  // namespace corvid
