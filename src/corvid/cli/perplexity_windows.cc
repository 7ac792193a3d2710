#include "corvid/cli/perplexity_windows.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "corvid/core/error.h"

namespace corvid::cli {

namespace {

std::vector<int32_t> read_tokens(const WindowArgs& a, const Tokenizer* tokenizer, const char* verb) {
  if (!a.token_ids.empty()) {
    std::istringstream in(read_text_file(a.token_ids, verb));
    std::vector<int32_t> ids;
    for (int64_t id; in >> id;) {
      CORVID_CHECK(id >= 0 && id <= INT32_MAX, verb, ": token id ", id, " in ", a.token_ids);
      ids.push_back(static_cast<int32_t>(id));
    }
    CORVID_CHECK(in.eof(), verb, ": ", a.token_ids, " is not whitespace-separated token ids");
    return ids;
  }
  const std::string text = read_text_file(a.file, verb);
  CORVID_CHECK(tokenizer, verb, ": ", a.common.model, " has no tokenizer: pass --token-ids");
  return tokenizer->encode(text, /*add_special_tokens=*/false);
}

}  // namespace

double log_sum_exp(const float* row, int64_t n) {
  float top = row[0];
  for (int64_t i = 1; i < n; ++i) top = std::max(top, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - top);
  return std::log(sum) + top;
}

void add_window_options(CLI::App& cmd, WindowArgs& args) {
  add_common_options(cmd, args.common);
  cmd.add_option("--file", args.file, "the text (UTF-8)");
  cmd.add_option("--token-ids", args.token_ids, "a file of whitespace-separated token ids instead of a text");
  cmd.add_option("--context,-c", args.context, "tokens a window holds (the second half of each is scored)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--chunks", args.chunks, "at most this many windows (0: all)")->check(CLI::NonNegativeNumber);
}

WindowRun open_windows(const WindowArgs& a, const char* verb) {
  apply_common_options(a.common);
  CORVID_CHECK(a.file.empty() != a.token_ids.empty(), verb, ": give --file TEXT or --token-ids FILE");
  CORVID_CHECK(a.context >= 4, verb, ": --context must be at least 4");
  WindowRun run;
  run.model = load_model(a.common);
  run.tokens = read_tokens(a, run.model.tokenizer.get(), verb);
  run.context = a.context;
  run.vocab = run.model.model->config().vocab_size;
  const int64_t whole = static_cast<int64_t>(run.tokens.size()) / a.context;
  CORVID_CHECK(whole >= 1, verb, ": the text is ", run.tokens.size(), " tokens, less than one window of ", a.context);
  run.chunks = a.chunks > 0 ? std::min(a.chunks, whole) : whole;
  for (int32_t t : run.tokens)
    CORVID_CHECK(t < run.vocab, verb, ": token id ", t, " is outside the vocabulary of ", run.vocab);
  run.kv = kv_cache_format(a.common, run.model.model->device());
  const Tokenizer* tok = run.model.tokenizer.get();
  run.bos = tok && tok->adds_bos() ? tok->bos_id() : std::nullopt;
  run.kv_label = kv_format_name(run.kv) + " KV" +
                 (a.common.kv_config.empty() ? std::string() : " + per-layer rules of " + a.common.kv_config) +
                 (a.common.kv_quant_start > 0 ? " from position " + std::to_string(a.common.kv_quant_start) : "");
  run.session = std::make_unique<Session>(*run.model.runner, a.context, run.kv,
                                          kv_layer_formats(a.common, *run.model.model), a.common.kv_quant_start);
  std::fprintf(stderr, "corvid %s: %lld tokens, %lld windows of %lld, scoring the last %lld of each, %s\n", verb,
               static_cast<long long>(run.tokens.size()), static_cast<long long>(run.chunks),
               static_cast<long long>(a.context), static_cast<long long>(a.context - 1 - a.context / 2),
               run.kv_label.c_str());
  return run;
}

std::vector<int32_t> WindowRun::window(int64_t c) {
  std::vector<int32_t> w(tokens.begin() + c * context, tokens.begin() + (c + 1) * context);
  if (bos) w[0] = *bos;
  session->reset();
  return w;
}

}  // namespace corvid::cli
