// corvid kl: how far a run's token distributions are from a reference run's, as
// llama.cpp's --kl-divergence measures it: the same windows and scored positions as
// corvid perplexity; --save-reference writes the reference run's log-probabilities
// (f16, one row of the vocabulary per scored position) once, and a later run with
// --reference compares its own against them: mean and p99 KL(reference || run), the
// share of positions whose most likely token is the same (top-1 agreement), and both
// perplexities.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "corvid/cli/common.h"
#include "corvid/cli/perplexity_windows.h"
#include "corvid/core/error.h"
#include "corvid/core/half.h"
#include "corvid/engine/session.h"

namespace corvid::cli {

namespace {

struct KlArgs {
  WindowArgs windows;
  std::string save_reference, reference;
};

constexpr char kMagic[8] = {'C', 'V', 'K', 'L', 'v', '1', 0, 0};

struct Header {
  char magic[8];
  int64_t vocab, context, chunks, positions;
};

// log_softmax of one row, in double.
void log_softmax(const float* row, int64_t vocab, std::vector<double>& out) {
  const double lse = log_sum_exp(row, vocab);
  out.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) out[static_cast<size_t>(i)] = row[i] - lse;
}

void run_kl(const KlArgs& a) {
  CORVID_CHECK(a.save_reference.empty() != a.reference.empty(),
               "kl: give --save-reference FILE (the reference run) or --reference FILE (compare with it)");
  WindowRun run = open_windows(a.windows, "kl");
  const int64_t vocab = run.vocab, n_ctx = a.windows.context, first = n_ctx / 2;
  const int64_t per_chunk = n_ctx - 1 - first, positions = run.chunks * per_chunk;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.vocab = vocab;
  h.context = n_ctx;
  h.chunks = run.chunks;
  h.positions = positions;
  std::ofstream save;
  std::ifstream ref;
  if (!a.save_reference.empty()) {
    save.open(a.save_reference, std::ios::binary);
    CORVID_CHECK(save, "kl: cannot write ", a.save_reference);
    save.write(reinterpret_cast<const char*>(&h), sizeof h);
  } else {
    ref.open(a.reference, std::ios::binary);
    CORVID_CHECK(ref, "kl: cannot read ", a.reference);
    Header got{};
    ref.read(reinterpret_cast<char*>(&got), sizeof got);
    CORVID_CHECK(ref && std::memcmp(got.magic, kMagic, sizeof kMagic) == 0, "kl: ", a.reference,
                 " is not a reference file of corvid kl --save-reference");
    CORVID_CHECK(got.vocab == h.vocab && got.context == h.context && got.chunks == h.chunks, "kl: ", a.reference,
                 " was made with vocabulary ", got.vocab, ", context ", got.context, ", ", got.chunks,
                 " windows; this run has ", h.vocab, ", ", h.context, ", ", h.chunks);
  }
  std::vector<double> lp, ref_lp(static_cast<size_t>(vocab));
  std::vector<uint16_t> row16(static_cast<size_t>(vocab));
  std::vector<double> kls;
  double nll = 0, ref_nll = 0;
  int64_t agree = 0;
  for (int64_t c = 0; c < run.chunks; ++c) {
    const std::vector<int32_t> window = run.window(c);
    const Tensor& logits = run.session->score(window);
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      log_softmax(logits.ptr<float>() + j * vocab, vocab, lp);
      const int32_t next = window[static_cast<size_t>(j + 1)];
      nll -= lp[static_cast<size_t>(next)];
      if (save.is_open()) {
        for (int64_t i = 0; i < vocab; ++i) row16[static_cast<size_t>(i)] = f32_to_f16(static_cast<float>(lp[static_cast<size_t>(i)]));
        save.write(reinterpret_cast<const char*>(row16.data()), static_cast<std::streamsize>(row16.size() * 2));
        continue;
      }
      ref.read(reinterpret_cast<char*>(row16.data()), static_cast<std::streamsize>(row16.size() * 2));
      CORVID_CHECK(ref, "kl: ", a.reference, " ends early");
      double kl = 0;
      size_t ref_top = 0, top = 0;
      for (size_t i = 0; i < row16.size(); ++i) {
        ref_lp[i] = f16_to_f32(row16[i]);
        kl += std::exp(ref_lp[i]) * (ref_lp[i] - lp[i]);
        if (ref_lp[i] > ref_lp[ref_top]) ref_top = i;
        if (lp[i] > lp[top]) top = i;
      }
      kls.push_back(std::max(kl, 0.0));
      agree += ref_top == top;
      ref_nll -= ref_lp[static_cast<size_t>(next)];
    }
  }
  const double n = static_cast<double>(positions);
  if (save.is_open()) {
    CORVID_CHECK(save.good(), "kl: writing ", a.save_reference, " failed");
    std::printf("saved %lld positions' log-probabilities to %s (PPL %.4f, %s)\n", static_cast<long long>(positions),
                a.save_reference.c_str(), std::exp(nll / n), run.kv_label.c_str());
    return;
  }
  double mean = 0;
  for (double k : kls) mean += k;
  mean /= n;
  std::vector<double> sorted = kls;
  std::sort(sorted.begin(), sorted.end());
  const double p99 = sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(sorted.size())))];
  std::printf("KL mean %.6f, p99 %.6f, max %.6f; top-1 agreement %.2f%%; PPL %.4f (reference %.4f) over %lld "
              "positions, %s\n",
              mean, p99, sorted.back(), 100.0 * static_cast<double>(agree) / n, std::exp(nll / n), std::exp(ref_nll / n),
              static_cast<long long>(positions), run.kv_label.c_str());
}

}  // namespace

void register_kl(CLI::App& app) {
  auto args = std::make_shared<KlArgs>();
  CLI::App* cmd = app.add_subcommand(
      "kl", "KL divergence of a run's token distributions from a saved reference run's (same windows as perplexity)");
  add_window_options(*cmd, args->windows);
  cmd->add_option("--save-reference", args->save_reference, "run as the reference and write its log-probabilities here");
  cmd->add_option("--reference", args->reference, "compare with the reference written by --save-reference");
  cmd->callback([args] { run_kl(*args); });
}

}  // namespace corvid::cli
