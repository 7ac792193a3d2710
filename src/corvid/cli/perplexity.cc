// corvid perplexity: a model's perplexity over a text, as llama.cpp's perplexity tool
// measures it, so that KV formats (and weights) can be compared by what they cost. The
// text's tokens are cut into non-overlapping windows of --context tokens; the first
// token of a window becomes BOS where the tokenizer adds one; each window runs from an
// empty cache, and the second half of its positions is scored (each then has at least
// half a window of context): the negative log-likelihood of token j + 1 under the
// logits of position j. PPL = exp(mean NLL), with the standard error of the mean.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "corvid/cli/perplexity_windows.h"

namespace corvid::cli {

namespace {

// -log softmax(row)[target], in double.
double nll(const float* row, int64_t vocab, int32_t target) {
  return log_sum_exp(row, vocab) - static_cast<double>(row[target]);
}

void run_perplexity(const WindowArgs& a) {
  WindowRun run = open_windows(a, "perplexity");
  const int64_t n_ctx = a.context, vocab = run.vocab, first = n_ctx / 2;
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < run.chunks; ++c) {
    const std::vector<int32_t> window = run.window(c);
    const Tensor& logits = run.session->score(window);
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const double v = nll(logits.ptr<float>() + j * vocab, vocab, window[static_cast<size_t>(j + 1)]);
      sum += v;
      sum_sq += v * v;
      ++count;
    }
    std::printf("[%lld]%.4f%s", static_cast<long long>(c + 1), std::exp(sum / static_cast<double>(count)),
                c + 1 == run.chunks ? "\n" : ",");
    std::fflush(stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mean = sum / static_cast<double>(count);
  const double var = count > 1 ? (sum_sq / static_cast<double>(count) - mean * mean) * static_cast<double>(count) /
                                     static_cast<double>(count - 1)
                               : 0.0;
  const double ppl = std::exp(mean), err = ppl * std::sqrt(std::max(var, 0.0) / static_cast<double>(count));
  std::printf("PPL = %.4f +/- %.4f (%lld tokens scored, context %lld, %s; %.1f tokens/s)\n", ppl, err,
              static_cast<long long>(count), static_cast<long long>(n_ctx), run.kv_label.c_str(),
              static_cast<double>(run.chunks * n_ctx) / seconds);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto args = std::make_shared<WindowArgs>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity over a text in windows of --context tokens, as llama.cpp's perplexity tool measures it");
  add_window_options(*cmd, *args);
  cmd->callback([args] { run_perplexity(*args); });
}

}  // namespace corvid::cli
