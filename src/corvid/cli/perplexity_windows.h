// What corvid perplexity and corvid kl share: a text (or token ids) cut into windows
// of --context tokens, as llama.cpp's perplexity tool cuts it. Each window starts from an
// empty cache, its first token replaced by BOS where the tokenizer adds one, and the
// second half of its positions is scored.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "corvid/cli/common.h"
#include "corvid/engine/session.h"

namespace corvid::cli {

struct WindowArgs {
  CommonOptions common;
  std::string file;
  std::string token_ids;  // a file of whitespace-separated ids instead of --file's text
  int64_t context = 512;
  int64_t chunks = 0;  // 0: every whole window of the text
};

void add_window_options(CLI::App& cmd, WindowArgs& args);

struct WindowRun {
  LoadedModel model;
  std::vector<int32_t> tokens;
  int64_t chunks = 0, vocab = 0;
  KvFormat kv = DType::F32;
  std::string kv_label;  // the KV format(s), for the report: "q8_g64 KV", "F32 KV + per-layer rules of FILE"
  std::optional<int32_t> bos;
  std::unique_ptr<Session> session;
  int64_t context = 0;
  // Window c's tokens (BOS first where the tokenizer adds one), the session emptied for it.
  std::vector<int32_t> window(int64_t c);
};

// log(sum(exp(row))) over a row of logits, in double and shifted by its maximum.
double log_sum_exp(const float* row, int64_t n);

// Loads the model and the tokens; `verb` names the command in messages.
WindowRun open_windows(const WindowArgs& args, const char* verb);

}  // namespace corvid::cli
