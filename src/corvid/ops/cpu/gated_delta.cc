// Gated DeltaNet on the CPU (ops/gated_delta.h), in fp32 throughout as the reference
// implementations keep the recurrence. Work is split over (run, value head) pairs, each
// computed by the same code whatever else the step holds, so a sequence's result does
// not depend on the batch.
//
// The chunked form (per head, a chunk of L <= 64 tokens, state S [dk, dv] on entry;
// G = the chunk's running sum of g, kβ_i = β_i k_i, vβ_i = β_i v_i):
//   T = (I + M)^-1, M[i][j] = (kβ_i · k_j) e^(G_i − G_j) for j < i  (forward substitution)
//   U = T vβ,  W = T (kβ ⊙ e^G)
//   Vnew = U − W S
//   out_i = e^(G_i) Sᵀ q_i + Σ_{j <= i} (q_i · k_j) e^(G_i − G_j) Vnew_j
//   S ← e^(G_last) S + Σ_j e^(G_last − G_j) k_j ⊗ Vnew_j
// which unrolls the recurrent form exactly in real arithmetic (T is the WY / UT
// representation of the chunk's products of (I − β k kᵀ) factors).
#include "corvid/ops/cpu/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "corvid/core/thread_pool.h"

namespace corvid::ops::cpu {

namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), without overflow for large x.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The operands of one (run, value head): token t's rows of q/k (its key head) and v/out,
// and its gates, with strides of whole tokens.
struct HeadView {
  const float *q, *k, *v, *g, *beta;
  float* out;
  int64_t qk_stride, v_stride, gate_stride;  // floats from one token to the next
  int64_t dk, dv;
  const float* q_at(int64_t t) const { return q + t * qk_stride; }
  const float* k_at(int64_t t) const { return k + t * qk_stride; }
  const float* v_at(int64_t t) const { return v + t * v_stride; }
  float* out_at(int64_t t) const { return out + t * v_stride; }
  float g_at(int64_t t) const { return g[t * gate_stride]; }
  float beta_at(int64_t t) const { return beta[t * gate_stride]; }
};

// Tokens [0, len) of h one at a time; s [dk, dv].
void recurrent(const HeadView& h, int64_t len, float* s) {
  const int64_t dk = h.dk, dv = h.dv;
  std::vector<float> m(static_cast<size_t>(dv));
  for (int64_t t = 0; t < len; ++t) {
    const float alpha = std::exp(h.g_at(t)), beta = h.beta_at(t);
    const float *k = h.k_at(t), *q = h.q_at(t), *v = h.v_at(t);
    std::fill(m.begin(), m.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* row = s + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        row[j] *= alpha;
        m[static_cast<size_t>(j)] += row[j] * k[i];
      }
    }
    for (int64_t j = 0; j < dv; ++j) m[static_cast<size_t>(j)] = beta * (v[j] - m[static_cast<size_t>(j)]);
    float* o = h.out_at(t);
    std::fill(o, o + dv, 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      float* row = s + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        row[j] += k[i] * m[static_cast<size_t>(j)];
        o[j] += row[j] * q[i];
      }
    }
  }
}

// Tokens [0, len) of h in chunks of kDeltaChunk; s [dk, dv].
void chunked(const HeadView& h, int64_t len, float* s) {
  const int64_t dk = h.dk, dv = h.dv, C = kDeltaChunk;
  std::vector<float> G(C), T(C * C), U(C * dv), W(C * dk), A(C * C), kk(C * C);
  std::vector<float> snew(dk * dv);
  for (int64_t c0 = 0; c0 < len; c0 += C) {
    const int64_t L = std::min(C, len - c0);
    float acc = 0.0f;
    for (int64_t i = 0; i < L; ++i) G[i] = acc += h.g_at(c0 + i);
    // k_i · k_j and q_i · k_j for j <= i.
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        kk[i * C + j] = dot(h.k_at(c0 + i), h.k_at(c0 + j), dk);
        A[i * C + j] = dot(h.q_at(c0 + i), h.k_at(c0 + j), dk) * std::exp(G[i] - G[j]);
      }
    // T = (I + M)^-1 by forward substitution: row i of T solves T_i + Σ_{j<i} M[i][j] T_j = e_i.
    for (int64_t i = 0; i < L; ++i) {
      float* ti = &T[i * C];
      std::fill(ti, ti + L, 0.0f);
      ti[i] = 1.0f;
      const float bi = h.beta_at(c0 + i);
      for (int64_t j = 0; j < i; ++j) {
        const float mij = bi * kk[i * C + j] * std::exp(G[i] - G[j]);
        const float* tj = &T[j * C];
        for (int64_t x = 0; x <= j; ++x) ti[x] -= mij * tj[x];
      }
    }
    // U = T vβ, W = T (kβ ⊙ e^G); then U − W S in U.
    for (int64_t i = 0; i < L; ++i) {
      float* u = &U[i * dv];
      float* w = &W[i * dk];
      std::fill(u, u + dv, 0.0f);
      std::fill(w, w + dk, 0.0f);
      for (int64_t j = 0; j <= i; ++j) {
        const float t = T[i * C + j] * h.beta_at(c0 + j);
        if (t == 0.0f) continue;
        const float *vj = h.v_at(c0 + j), *kj = h.k_at(c0 + j);
        const float te = t * std::exp(G[j]);
        for (int64_t x = 0; x < dv; ++x) u[x] += t * vj[x];
        for (int64_t x = 0; x < dk; ++x) w[x] += te * kj[x];
      }
      for (int64_t x = 0; x < dk; ++x) {
        const float wx = w[x];
        const float* srow = s + x * dv;
        for (int64_t y = 0; y < dv; ++y) u[y] -= wx * srow[y];
      }
    }
    // Outputs.
    for (int64_t i = 0; i < L; ++i) {
      float* o = h.out_at(c0 + i);
      std::fill(o, o + dv, 0.0f);
      const float* q = h.q_at(c0 + i);
      const float eg = std::exp(G[i]);
      for (int64_t x = 0; x < dk; ++x) {
        const float qx = q[x] * eg;
        const float* srow = s + x * dv;
        for (int64_t y = 0; y < dv; ++y) o[y] += qx * srow[y];
      }
      for (int64_t j = 0; j <= i; ++j) {
        const float a = A[i * C + j];
        const float* u = &U[j * dv];
        for (int64_t y = 0; y < dv; ++y) o[y] += a * u[y];
      }
    }
    // The state after the chunk.
    const float last = G[L - 1], decay = std::exp(last);
    for (int64_t x = 0; x < dk * dv; ++x) snew[x] = decay * s[x];
    for (int64_t j = 0; j < L; ++j) {
      const float e = std::exp(last - G[j]);
      const float* kj = h.k_at(c0 + j);
      const float* u = &U[j * dv];
      for (int64_t x = 0; x < dk; ++x) {
        const float kx = e * kj[x];
        float* row = &snew[x * dv];
        for (int64_t y = 0; y < dv; ++y) row[y] += kx * u[y];
      }
    }
    std::memcpy(s, snew.data(), sizeof(float) * static_cast<size_t>(dk * dv));
  }
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const RecurrentRuns& runs,
                        const Tensor& out) {
  const int64_t channels = x.dim(1), kernel = weight.dim(1), hist = kernel - 1;
  const float* xs = x.ptr<float>();
  const float* w = weight.ptr<float>();
  float* o = out.ptr<float>();
  for (size_t r = 0; r + 1 < runs.starts.size(); ++r) {
    const int64_t t0 = runs.starts[r], len = runs.starts[r + 1] - t0;
    if (len == 0) continue;
    float* state = conv_state.ptr<float>() + static_cast<int64_t>(runs.slots[r]) * hist * channels;
    // Input i of the run (i < 0: the state's row hist + i).
    auto in = [&](int64_t i, int64_t c) { return i < 0 ? state[(hist + i) * channels + c] : xs[(t0 + i) * channels + c]; };
    ThreadPool::global().parallel_for(
        channels,
        [&](int64_t c0, int64_t c1, int) {
          for (int64_t c = c0; c < c1; ++c) {
            const float* wc = w + c * kernel;
            for (int64_t i = 0; i < len; ++i) {
              float sum = 0.0f;
              for (int64_t j = 0; j < kernel; ++j) sum += wc[j] * in(i - hist + j, c);
              o[(t0 + i) * channels + c] = silu(sum);
            }
            // The latest hist inputs, oldest first (rows still read above are rewritten last).
            float last[16];
            for (int64_t j = 0; j < hist; ++j) last[j] = in(len - hist + j, c);
            for (int64_t j = 0; j < hist; ++j) state[j * channels + c] = last[j];
          }
        },
        64);
  }
}

void delta_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                 const Tensor& beta) {
  const int64_t n = a.dim(0), heads = a.dim(1);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t i = t * heads + h;
      g.ptr<float>()[i] = -std::exp(a_log.ptr<float>()[h]) * softplus(a.ptr<float>()[i] + dt_bias.ptr<float>()[h]);
      beta.ptr<float>()[i] = sigmoid(b.ptr<float>()[i]);
    }
}

void l2_normalize_heads(const Tensor& x, float eps, float scale) {
  const int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  float* p = x.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * d;
    const float inv = scale / std::sqrt(dot(row, row, d) + eps);
    for (int64_t i = 0; i < d; ++i) row[i] *= inv;
  }
}

void gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& z, float eps, const Tensor& out) {
  const int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  const float *w = weight.ptr<float>(), *zs = z.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.ptr<float>() + r * d;
    float* o = out.ptr<float>() + r * d;
    const float inv = 1.0f / std::sqrt(dot(row, row, d) / static_cast<float>(d) + eps);
    for (int64_t i = 0; i < d; ++i) o[i] = row[i] * inv * w[i] * silu(zs[r * d + i]);
  }
}

void mul_sigmoid(const Tensor& x, const Tensor& gate) {
  float* p = x.ptr<float>();
  const float* gs = gate.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] *= sigmoid(gs[i]);
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Tensor& state, const RecurrentRuns& runs, const Tensor& out, DeltaForm form) {
  const int64_t hk = q.dim(1), dk = q.dim(2), hv = v.dim(1), dv = v.dim(2), ratio = hv / hk;
  const int64_t n_runs = static_cast<int64_t>(runs.slots.size());
  ThreadPool::global().parallel_for(n_runs * hv, [&](int64_t w0, int64_t w1, int) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t r = w / hv, h = w % hv;
      const int64_t t0 = runs.starts[static_cast<size_t>(r)], len = runs.starts[static_cast<size_t>(r) + 1] - t0;
      if (len == 0) continue;
      const HeadView view{q.ptr<float>() + (t0 * hk + h / ratio) * dk,
                          k.ptr<float>() + (t0 * hk + h / ratio) * dk,
                          v.ptr<float>() + (t0 * hv + h) * dv,
                          g.ptr<float>() + t0 * hv + h,
                          beta.ptr<float>() + t0 * hv + h,
                          out.ptr<float>() + (t0 * hv + h) * dv,
                          hk * dk,
                          hv * dv,
                          hv,
                          dk,
                          dv};
      float* s = state.ptr<float>() + ((static_cast<int64_t>(runs.slots[static_cast<size_t>(r)]) * hv + h) * dk * dv);
      const bool use_chunks = form == DeltaForm::Chunked || (form == DeltaForm::Auto && len > 1);
      if (use_chunks) chunked(view, len, s);
      else recurrent(view, len, s);
    }
  });
}

}  // namespace corvid::ops::cpu
