// corvid perplexity: a model's perplexity over a text, as llama.cpp's perplexity tool
// measures it, so that KV formats (and weights) can be compared by what they cost. The
// text's tokens are cut into non-overlapping windows of --context tokens; the first
// token of a window becomes BOS where the tokenizer adds one; each window runs from an
// empty cache, and the second half of its positions is scored (each then has at least
// half a window of context): the negative log-likelihood of token j + 1 under the
// logits of position j. PPL = exp(mean NLL), with the standard error of the mean.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "corvid/cli/common.h"
#include "corvid/core/error.h"
#include "corvid/engine/session.h"

namespace corvid::cli {

namespace {

struct PerplexityArgs {
  CommonOptions common;
  std::string file;
  std::string token_ids;  // a file of whitespace-separated ids instead of --file's text
  int64_t context = 512;
  int64_t chunks = 0;  // 0: every whole window of the text
};

std::vector<int32_t> read_tokens(const PerplexityArgs& a, const Tokenizer* tokenizer) {
  const std::string& path = a.token_ids.empty() ? a.file : a.token_ids;
  std::ifstream in(path, std::ios::binary);
  CORVID_CHECK(in, "perplexity: cannot read ", path);
  if (!a.token_ids.empty()) {
    std::vector<int32_t> ids;
    for (int64_t id; in >> id;) {
      CORVID_CHECK(id >= 0 && id <= INT32_MAX, "perplexity: token id ", id, " in ", path);
      ids.push_back(static_cast<int32_t>(id));
    }
    CORVID_CHECK(in.eof(), "perplexity: ", path, " is not whitespace-separated token ids");
    return ids;
  }
  CORVID_CHECK(tokenizer, "perplexity: ", a.common.model, " has no tokenizer: pass --token-ids");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return tokenizer->encode(text, /*add_special_tokens=*/false);
}

// -log softmax(row)[target], in double.
double nll(const float* row, int64_t vocab, int32_t target) {
  float top = row[0];
  for (int64_t i = 1; i < vocab; ++i) top = std::max(top, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - top);
  return std::log(sum) - (static_cast<double>(row[target]) - top);
}

void run_perplexity(const PerplexityArgs& a) {
  apply_common_options(a.common);
  CORVID_CHECK(a.file.empty() != a.token_ids.empty(), "perplexity: give --file TEXT or --token-ids FILE");
  CORVID_CHECK(a.context >= 4, "perplexity: --context must be at least 4");
  LoadedModel m = load_model(a.common);
  const std::vector<int32_t> tokens = read_tokens(a, m.tokenizer.get());
  const int64_t n_ctx = a.context, vocab = m.model->config().vocab_size;
  const int64_t whole = static_cast<int64_t>(tokens.size()) / n_ctx;
  CORVID_CHECK(whole >= 1, "perplexity: the text is ", tokens.size(), " tokens, less than one window of ", n_ctx);
  const int64_t chunks = a.chunks > 0 ? std::min(a.chunks, whole) : whole;
  for (int32_t t : tokens) CORVID_CHECK(t < vocab, "perplexity: token id ", t, " is outside the vocabulary of ", vocab);
  const DType kv = kv_cache_dtype(a.common, m.model->device());
  const std::optional<int32_t> bos = m.tokenizer && m.tokenizer->adds_bos() ? m.tokenizer->bos_id() : std::nullopt;
  std::fprintf(stderr, "corvid perplexity: %lld tokens, %lld windows of %lld, scoring the last %lld of each, %s KV\n",
               static_cast<long long>(tokens.size()), static_cast<long long>(chunks), static_cast<long long>(n_ctx),
               static_cast<long long>(n_ctx - 1 - n_ctx / 2), std::string(dtype_name(kv)).c_str());
  Session session(*m.runner, n_ctx, kv);
  const int64_t first = n_ctx / 2;
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (bos) window[0] = *bos;
    session.reset();
    const Tensor& logits = session.score(window);
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const double v = nll(logits.ptr<float>() + j * vocab, vocab, window[static_cast<size_t>(j + 1)]);
      sum += v;
      sum_sq += v * v;
      ++count;
    }
    std::printf("[%lld]%.4f%s", static_cast<long long>(c + 1), std::exp(sum / static_cast<double>(count)),
                c + 1 == chunks ? "\n" : ",");
    std::fflush(stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mean = sum / static_cast<double>(count);
  const double var = count > 1 ? (sum_sq / static_cast<double>(count) - mean * mean) * static_cast<double>(count) /
                                     static_cast<double>(count - 1)
                               : 0.0;
  const double ppl = std::exp(mean), err = ppl * std::sqrt(std::max(var, 0.0) / static_cast<double>(count));
  std::printf("PPL = %.4f +/- %.4f (%lld tokens scored, context %lld, %s KV; %.1f tokens/s)\n", ppl, err,
              static_cast<long long>(count), static_cast<long long>(n_ctx), std::string(dtype_name(kv)).c_str(),
              static_cast<double>(chunks * n_ctx) / seconds);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity over a text in windows of --context tokens, as llama.cpp's perplexity tool measures it");
  add_common_options(*cmd, args->common);
  cmd->add_option("--file", args->file, "the text (UTF-8)");
  cmd->add_option("--token-ids", args->token_ids, "a file of whitespace-separated token ids instead of a text");
  cmd->add_option("--context,-c", args->context, "tokens a window holds (the second half of each is scored)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunks", args->chunks, "score at most this many windows (0: all)")->check(CLI::NonNegativeNumber);
  cmd->callback([args] { run_perplexity(*args); });
}

}  // namespace corvid::cli
