// Gated DeltaNet's ops (ops/gated_delta.h) on the CPU:
// - the recurrent form equals a double-precision transcription of the reference
//   recurrence (architectures.md §2.4) within 2e-5;
// - the chunked form equals the recurrent one on long random inputs (outputs and the
//   final state within 1e-4 relative), from a non-zero state, and a prefill split at
//   any point (chunk boundaries, one past, one before, single tokens) continues where
//   the previous piece ended;
// - runs of several sequences in one call give each sequence's result alone bit for bit;
// - the convolution equals its formula and continues across a split bit for bit;
// - the gates and norms equal their formulas.
#include "corvid/ops/gated_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "corvid/core/error.h"
#include "ops_test_util.h"

namespace corvid {
namespace {

using namespace corvid::testing;

struct DeltaInputs {
  int64_t n, hk, hv, dk, dv;
  std::vector<float> q, k, v, g, beta, state;
};

// Normalised q/k as the layer makes them, gates from random a/b through delta_gates.
DeltaInputs make_inputs(int64_t n, int64_t hk, int64_t hv, int64_t dk, int64_t dv, uint32_t seed) {
  DeltaInputs in{n, hk, hv, dk, dv, random_floats(n * hk * dk, seed), random_floats(n * hk * dk, seed + 1),
                 random_floats(n * hv * dv, seed + 2), {}, {}, random_floats(hv * dk * dv, seed + 3, 0.5f)};
  OwnedTensor q = f32_tensor({n, hk, dk}, in.q), k = f32_tensor({n, hk, dk}, in.k);
  ops::l2_normalize_heads(q.tensor, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
  ops::l2_normalize_heads(k.tensor, 1e-6f, 1.0f);
  in.q.assign(q.ptr<float>(), q.ptr<float>() + in.q.size());
  in.k.assign(k.ptr<float>(), k.ptr<float>() + in.k.size());
  OwnedTensor a = f32_tensor({n, hv}, random_floats(n * hv, seed + 4, 2.0f));
  OwnedTensor b = f32_tensor({n, hv}, random_floats(n * hv, seed + 5, 2.0f));
  OwnedTensor a_log = f32_tensor({hv}, random_floats(hv, seed + 6, 1.0f));
  OwnedTensor dt_bias = f32_tensor({hv}, random_floats(hv, seed + 7, 1.0f));
  OwnedTensor g(DType::F32, {n, hv}), beta(DType::F32, {n, hv});
  ops::delta_gates(a.tensor, b.tensor, a_log.tensor, dt_bias.tensor, g.tensor, beta.tensor);
  in.g.assign(g.ptr<float>(), g.ptr<float>() + n * hv);
  in.beta.assign(beta.ptr<float>(), beta.ptr<float>() + n * hv);
  return in;
}

// Runs tokens [t0, t1) of `in` from `state` (updated) with `form`; returns their outputs.
std::vector<float> run_piece(const DeltaInputs& in, int64_t t0, int64_t t1, std::vector<float>& state,
                             ops::DeltaForm form) {
  const int64_t n = t1 - t0;
  auto rows = [&](const std::vector<float>& x, int64_t width) {
    return std::vector<float>(x.begin() + t0 * width, x.begin() + t1 * width);
  };
  OwnedTensor q = f32_tensor({n, in.hk, in.dk}, rows(in.q, in.hk * in.dk));
  OwnedTensor k = f32_tensor({n, in.hk, in.dk}, rows(in.k, in.hk * in.dk));
  OwnedTensor v = f32_tensor({n, in.hv, in.dv}, rows(in.v, in.hv * in.dv));
  OwnedTensor g = f32_tensor({n, in.hv}, rows(in.g, in.hv)), beta = f32_tensor({n, in.hv}, rows(in.beta, in.hv));
  OwnedTensor s = f32_tensor({1, in.hv, in.dk, in.dv}, state);
  OwnedTensor out(DType::F32, {n, in.hv, in.dv});
  const std::vector<int64_t> starts = {0, n};
  const std::vector<int32_t> slots = {0};
  ops::gated_delta_rule(q.tensor, k.tensor, v.tensor, g.tensor, beta.tensor, s.tensor, {starts, slots}, out.tensor,
                        form);
  state.assign(s.ptr<float>(), s.ptr<float>() + state.size());
  return std::vector<float>(out.ptr<float>(), out.ptr<float>() + n * in.hv * in.dv);
}

double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return err / std::max(scale, 1e-30);
}

TEST(GatedDelta, RecurrentFormIsTheReferenceRecurrence) {
  const DeltaInputs in = make_inputs(40, 2, 4, 16, 8, 11);
  std::vector<float> state = in.state;
  const std::vector<float> got = run_piece(in, 0, in.n, state, ops::DeltaForm::Recurrent);
  // The recurrence in double, straight from the notes.
  std::vector<double> s(in.state.begin(), in.state.end()), want(got.size()), final_state;
  for (int64_t h = 0; h < in.hv; ++h) {
    const int64_t kh = h / (in.hv / in.hk);
    double* S = s.data() + h * in.dk * in.dv;
    for (int64_t t = 0; t < in.n; ++t) {
      const float* k = &in.k[(t * in.hk + kh) * in.dk];
      const float* q = &in.q[(t * in.hk + kh) * in.dk];
      const float* v = &in.v[(t * in.hv + h) * in.dv];
      const double alpha = std::exp(static_cast<double>(in.g[t * in.hv + h])), beta = in.beta[t * in.hv + h];
      for (int64_t i = 0; i < in.dk * in.dv; ++i) S[i] *= alpha;
      for (int64_t j = 0; j < in.dv; ++j) {
        double m = 0;
        for (int64_t i = 0; i < in.dk; ++i) m += S[i * in.dv + j] * k[i];
        const double d = beta * (v[j] - m);
        for (int64_t i = 0; i < in.dk; ++i) S[i * in.dv + j] += k[i] * d;
      }
      for (int64_t j = 0; j < in.dv; ++j) {
        double o = 0;
        for (int64_t i = 0; i < in.dk; ++i) o += S[i * in.dv + j] * q[i];
        want[static_cast<size_t>((t * in.hv + h) * in.dv + j)] = o;
      }
    }
  }
  std::vector<float> want_f(want.begin(), want.end()), s_f(s.begin(), s.end());
  EXPECT_LE(max_rel(got, want_f), 2e-5);
  EXPECT_LE(max_rel(state, s_f), 2e-5);
}

TEST(GatedDelta, ChunkedFormEqualsTheRecurrentOne) {
  // 300 tokens: four whole chunks and a partial one; GQA-like 2 key heads for 4 value heads.
  const DeltaInputs in = make_inputs(300, 2, 4, 32, 16, 21);
  std::vector<float> rec_state = in.state, chunk_state = in.state;
  const std::vector<float> rec = run_piece(in, 0, in.n, rec_state, ops::DeltaForm::Recurrent);
  const std::vector<float> chk = run_piece(in, 0, in.n, chunk_state, ops::DeltaForm::Chunked);
  EXPECT_LE(max_rel(chk, rec), 1e-4);
  EXPECT_LE(max_rel(chunk_state, rec_state), 1e-4);
  // Every token, not just the largest: each output row within 1e-4 of its scale.
  for (int64_t t = 0; t < in.n; t += 1) {
    const size_t w = static_cast<size_t>(in.hv * in.dv);
    const std::vector<float> a(chk.begin() + t * w, chk.begin() + (t + 1) * w),
        b(rec.begin() + t * w, rec.begin() + (t + 1) * w);
    ASSERT_LE(max_rel(a, b), 1e-4) << "token " << t;
  }
}

TEST(GatedDelta, ASplitPrefillContinuesWhereThePreviousPieceEnded) {
  const DeltaInputs in = make_inputs(260, 1, 2, 32, 32, 31);
  std::vector<float> whole_state = in.state;
  const std::vector<float> whole = run_piece(in, 0, in.n, whole_state, ops::DeltaForm::Recurrent);
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
           {64}, {63}, {65}, {128, 192}, {1, 2, 3}, {100, 101, 200}, {259}}) {
    std::vector<float> state = in.state, got;
    int64_t t0 = 0;
    std::vector<int64_t> ends = cuts;
    ends.push_back(in.n);
    for (const int64_t t1 : ends) {
      const std::vector<float> piece = run_piece(in, t0, t1, state, ops::DeltaForm::Auto);
      got.insert(got.end(), piece.begin(), piece.end());
      t0 = t1;
    }
    EXPECT_LE(max_rel(got, whole), 1e-4) << "first cut " << cuts[0];
    EXPECT_LE(max_rel(state, whole_state), 1e-4) << "first cut " << cuts[0];
  }
}

TEST(GatedDelta, RunsOfSeveralSequencesEqualEachAloneBitForBit) {
  const DeltaInputs a = make_inputs(70, 2, 4, 16, 16, 41), b = make_inputs(1, 2, 4, 16, 16, 51);
  const DeltaInputs c = make_inputs(5, 2, 4, 16, 16, 61);
  for (const ops::DeltaForm form : {ops::DeltaForm::Auto, ops::DeltaForm::Recurrent, ops::DeltaForm::Chunked}) {
    std::vector<float> sa = a.state, sb = b.state, sc = c.state;
    const std::vector<float> oa = run_piece(a, 0, a.n, sa, form), ob = run_piece(b, 0, b.n, sb, form),
                             oc = run_piece(c, 0, c.n, sc, form);
    // One call: a in slot 2, b in slot 0, c in slot 1 of a 3-slot state.
    auto cat = [](std::initializer_list<const std::vector<float>*> xs) {
      std::vector<float> r;
      for (const auto* x : xs) r.insert(r.end(), x->begin(), x->end());
      return r;
    };
    const int64_t n = a.n + b.n + c.n;
    OwnedTensor q = f32_tensor({n, 2, 16}, cat({&a.q, &b.q, &c.q})), k = f32_tensor({n, 2, 16}, cat({&a.k, &b.k, &c.k}));
    OwnedTensor v = f32_tensor({n, 4, 16}, cat({&a.v, &b.v, &c.v}));
    OwnedTensor g = f32_tensor({n, 4}, cat({&a.g, &b.g, &c.g})), beta = f32_tensor({n, 4}, cat({&a.beta, &b.beta, &c.beta}));
    OwnedTensor s = f32_tensor({3, 4, 16, 16}, cat({&b.state, &c.state, &a.state}));
    OwnedTensor out(DType::F32, {n, 4, 16});
    const std::vector<int64_t> starts = {0, a.n, a.n + b.n, n};
    const std::vector<int32_t> slots = {2, 0, 1};
    ops::gated_delta_rule(q.tensor, k.tensor, v.tensor, g.tensor, beta.tensor, s.tensor, {starts, slots}, out.tensor,
                          form);
    const std::vector<float> want = cat({&oa, &ob, &oc}), want_state = cat({&sb, &sc, &sa});
    EXPECT_TRUE(bitwise_equal(out.ptr<float>(), want.data(), want.size()));
    EXPECT_TRUE(bitwise_equal(s.ptr<float>(), want_state.data(), want_state.size()));
  }
}

TEST(GatedDelta, ConvolutionIsItsFormulaAndContinuesAcrossASplit) {
  const int64_t n = 23, ch = 37, kernel = 4;
  const std::vector<float> x = random_floats(n * ch, 71), w = random_floats(ch * kernel, 72);
  const std::vector<float> state0 = random_floats((kernel - 1) * ch, 73);
  auto conv = [&](int64_t t0, int64_t t1, std::vector<float>& state) {
    OwnedTensor xt = f32_tensor({t1 - t0, ch}, std::vector<float>(x.begin() + t0 * ch, x.begin() + t1 * ch));
    OwnedTensor wt = f32_tensor({ch, kernel}, w), st = f32_tensor({1, kernel - 1, ch}, state);
    OwnedTensor out(DType::F32, {t1 - t0, ch});
    const std::vector<int64_t> starts = {0, t1 - t0};
    const std::vector<int32_t> slots = {0};
    ops::causal_conv1d_silu(xt.tensor, wt.tensor, st.tensor, {starts, slots}, out.tensor);
    state.assign(st.ptr<float>(), st.ptr<float>() + state.size());
    return std::vector<float>(out.ptr<float>(), out.ptr<float>() + (t1 - t0) * ch);
  };
  std::vector<float> state = state0;
  const std::vector<float> whole = conv(0, n, state);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < ch; ++c) {
      float sum = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t i = t - (kernel - 1) + j;
        sum += w[c * kernel + j] * (i < 0 ? state0[(kernel - 1 + i) * ch + c] : x[i * ch + c]);
      }
      ASSERT_NEAR(whole[t * ch + c], sum / (1 + std::exp(-sum)), 1e-6) << t << " " << c;
    }
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t j = 0; j < kernel - 1; ++j) EXPECT_EQ(state[j * ch + c], x[(n - kernel + 1 + j) * ch + c]);
  // Split into pieces of 1, 2 and the rest: the same bits.
  std::vector<float> s2 = state0, got;
  for (const auto& [t0, t1] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 3}, {3, n}}) {
    const std::vector<float> piece = conv(t0, t1, s2);
    got.insert(got.end(), piece.begin(), piece.end());
  }
  EXPECT_TRUE(bitwise_equal(got.data(), whole.data(), whole.size()));
  EXPECT_TRUE(bitwise_equal(s2.data(), state.data(), state.size()));
}

TEST(GatedDelta, GatesAndNormsAreTheirFormulas) {
  OwnedTensor a = f32_tensor({2, 3}, {-30, -1, 0, 0.5f, 3, 40}), b = f32_tensor({2, 3}, {-2, 0, 2, -5, 1, 9});
  OwnedTensor a_log = f32_tensor({3}, {-1, 0, 0.5f}), dt = f32_tensor({3}, {0.1f, -0.2f, 1});
  OwnedTensor g(DType::F32, {2, 3}), beta(DType::F32, {2, 3});
  ops::delta_gates(a.tensor, b.tensor, a_log.tensor, dt.tensor, g.tensor, beta.tensor);
  for (int64_t i = 0; i < 6; ++i) {
    const double x = a.ptr<float>()[i] + dt.ptr<float>()[i % 3];
    EXPECT_NEAR(g.ptr<float>()[i], -std::exp(a_log.ptr<float>()[i % 3]) * std::log1p(std::exp(x)), 1e-5) << i;
    EXPECT_NEAR(beta.ptr<float>()[i], 1 / (1 + std::exp(-b.ptr<float>()[i])), 1e-7) << i;
  }
  const std::vector<float> xv = random_floats(2 * 3 * 8, 81), zv = random_floats(2 * 3 * 8, 82),
                           wv = random_floats(8, 83);
  OwnedTensor x = f32_tensor({2, 3, 8}, xv), z = f32_tensor({2, 3, 8}, zv), w = f32_tensor({8}, wv);
  OwnedTensor out(DType::F32, {2, 3, 8});
  ops::gated_rms_norm(x.tensor, w.tensor, z.tensor, 1e-6f, out.tensor);
  ops::l2_normalize_heads(x.tensor, 1e-6f, 0.5f);
  for (int64_t r = 0; r < 6; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < 8; ++i) ss += xv[r * 8 + i] * xv[r * 8 + i];
    for (int64_t i = 0; i < 8; ++i) {
      const double zi = zv[r * 8 + i];
      const double want = xv[r * 8 + i] / std::sqrt(ss / 8 + 1e-6) * wv[i] * zi / (1 + std::exp(-zi));
      EXPECT_NEAR(out.ptr<float>()[r * 8 + i], want, 1e-5);
      EXPECT_NEAR(x.ptr<float>()[r * 8 + i], 0.5 * xv[r * 8 + i] / std::sqrt(ss + 1e-6), 1e-6);
    }
  }
}

TEST(GatedDelta, BadArgumentsAreRefusedWithTheirShapes) {
  OwnedTensor q(DType::F32, {4, 2, 8}), v(DType::F32, {4, 3, 8}), g(DType::F32, {4, 3}), s(DType::F32, {1, 3, 8, 8});
  OwnedTensor out(DType::F32, {4, 3, 8});
  const std::vector<int64_t> starts = {0, 4};
  const std::vector<int32_t> slots = {0};
  // 3 value heads over 2 key heads.
  EXPECT_THROW(ops::gated_delta_rule(q.tensor, q.tensor, v.tensor, g.tensor, g.tensor, s.tensor, {starts, slots},
                                     out.tensor),
               Error);
  OwnedTensor v4(DType::F32, {4, 4, 8}), g4(DType::F32, {4, 4}), s4(DType::F32, {1, 4, 8, 8}), o4(DType::F32, {4, 4, 8});
  const std::vector<int64_t> short_starts = {0, 3};
  EXPECT_THROW(ops::gated_delta_rule(q.tensor, q.tensor, v4.tensor, g4.tensor, g4.tensor, s4.tensor,
                                     {short_starts, slots}, o4.tensor),
               Error);
  const std::vector<int32_t> bad_slot = {1};
  EXPECT_THROW(ops::gated_delta_rule(q.tensor, q.tensor, v4.tensor, g4.tensor, g4.tensor, s4.tensor,
                                     {starts, bad_slot}, o4.tensor),
               Error);
}

}  // namespace
}  // namespace corvid
