// corvid generate / corvid chat.
#include <cstdio>
#include <iostream>
#include <string>

#include "corvid/cli/common.h"
#include "corvid/core/error.h"

namespace corvid::cli {

namespace {

// ChatML framing. The model's own chat template replaces this once the template engine lands.
std::string chatml_turn(const std::string& role, const std::string& content) {
  return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
}
const char* kAssistantStart = "<|im_start|>assistant\n";

bool has_chatml(const Tokenizer& tokenizer) {
  return tokenizer.token_to_id("<|im_start|>").has_value() && tokenizer.token_to_id("<|im_end|>").has_value();
}

// Streams generated tokens to stdout as text (special tokens hidden).
struct TextPrinter {
  StreamingDetokenizer detok;
  explicit TextPrinter(const Tokenizer& t) : detok(t, /*skip_special_tokens=*/true) {}
  bool operator()(int32_t id) {
    std::string piece = detok.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  void finish() {
    std::string rest = detok.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fflush(stdout);
  }
};

struct GenerateArgs {
  CommonOptions common;
  SamplingFlags sampling;
  std::string prompt;
  std::string system;
  int64_t max_tokens = 256;
  int64_t context = 0;
  bool raw = false;
  bool print_ids = false;
  bool ignore_eos = false;
};

int64_t context_size(const GenerateArgs& a, const ModelConfig& c, int64_t needed) {
  if (a.context > 0) return a.context;
  const int64_t model_max = c.max_position_embeddings > 0 ? c.max_position_embeddings : 4096;
  return std::min<int64_t>(model_max, std::max<int64_t>(needed, 4096));
}

void run_generate(GenerateArgs& a, const CLI::App& cmd) {
  apply_common_options(a.common);
  LoadedModel m = load_model(a.common);
  const Tokenizer& tok = *m.tokenizer;
  std::vector<int32_t> ids;
  if (a.raw || !has_chatml(tok)) {
    ids = tok.encode(a.prompt, /*add_special_tokens=*/true);
  } else {
    std::string text;
    if (!a.system.empty()) text += chatml_turn("system", a.system);
    text += chatml_turn("user", a.prompt) + kAssistantStart;
    ids = tok.encode(text, /*add_special_tokens=*/true);
  }
  CORVID_CHECK(!ids.empty(), "the prompt is empty and the model adds no BOS token; give a prompt");
  GenerateOptions opts;
  opts.max_new_tokens = a.max_tokens;
  opts.sampling = sampling_params(a.sampling, cmd, m.files->generation);
  if (!a.ignore_eos) opts.stop_ids = stop_token_ids(tok, m.model->config());
  Session session(*m.model, context_size(a, m.model->config(), static_cast<int64_t>(ids.size()) + a.max_tokens));
  TextPrinter printer(tok);
  printer.detok.prime(ids);  // so the first word keeps its leading space (SentencePiece)
  std::vector<int32_t> generated;
  GenerationStats stats = session.generate(ids, opts, [&](int32_t id) {
    generated.push_back(id);
    return a.print_ids ? true : printer(id);
  });
  if (a.print_ids) {
    std::string out = "[";
    for (size_t i = 0; i < generated.size(); ++i) out += (i ? ", " : "") + std::to_string(generated[i]);
    std::printf("%s]\n", out.c_str());
  } else {
    printer.finish();
    std::printf("\n");
  }
  print_stats(stats);
}

void run_chat(GenerateArgs& a, const CLI::App& cmd) {
  apply_common_options(a.common);
  LoadedModel m = load_model(a.common);
  const Tokenizer& tok = *m.tokenizer;
  CORVID_CHECK(has_chatml(tok), a.common.model, ": the vocabulary has no <|im_start|>/<|im_end|> tokens; chat needs a chat model");
  GenerateOptions opts;
  opts.max_new_tokens = a.max_tokens;
  opts.sampling = sampling_params(a.sampling, cmd, m.files->generation);
  opts.stop_ids = stop_token_ids(tok, m.model->config());
  Session session(*m.model, context_size(a, m.model->config(), 0));
  std::fprintf(stderr, "corvid chat: %s (%s). Type a message; an empty line or Ctrl-D ends.\n",
               a.common.model.c_str(), m.model->config().architecture.c_str());
  std::string pending = a.system.empty() ? "" : chatml_turn("system", a.system);
  bool first = true;
  for (std::string line;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    // After an answer the sequence ends with <|im_end|>; ChatML puts a newline after it.
    std::string text = (first ? "" : "\n") + pending + chatml_turn("user", line) + kAssistantStart;
    pending.clear();
    std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/first);
    first = false;
    const int64_t room = session.context_size() - static_cast<int64_t>(session.tokens().size() + ids.size());
    if (room < 2) {
      std::fprintf(stderr, "(context full: %lld tokens; start a new chat)\n", static_cast<long long>(session.context_size()));
      break;
    }
    GenerateOptions turn = opts;
    turn.max_new_tokens = std::min<int64_t>(opts.max_new_tokens, room - 1);
    TextPrinter printer(tok);
    printer.detok.prime(ids);
    GenerationStats stats = session.generate(ids, turn, [&](int32_t id) { return printer(id); });
    printer.finish();
    std::printf("\n");  // each answer ends its line, also when stdout is not a terminal
    if (!stats.stopped_by_eos) session.append(std::vector<int32_t>{*tok.token_to_id("<|im_end|>")});  // close the cut-off turn
    print_stats(stats);
  }
}

void add_generate_flags(CLI::App* cmd, GenerateArgs& a) {
  add_common_options(*cmd, a.common);
  add_sampling_options(*cmd, a.sampling);
  cmd->add_option("-n,--max-tokens", a.max_tokens, "most tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("-c,--context", a.context, "context size in tokens (default: what the request needs, at least 4096, at most the model's)");
  cmd->add_option("--system", a.system, "system message");
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  add_generate_flags(cmd, *args);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (a chat message unless --raw)")->required();
  cmd->add_flag("--raw", args->raw, "feed the prompt as is, without the chat template");
  cmd->add_flag("--ids", args->print_ids, "print generated token ids as JSON instead of text");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->callback([args, cmd] { run_generate(*args, *cmd); });
}

void register_chat(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  args->max_tokens = 512;
  CLI::App* cmd = app.add_subcommand("chat", "Interactive chat with a model");
  add_generate_flags(cmd, *args);
  cmd->callback([args, cmd] { run_chat(*args, *cmd); });
}

}  // namespace corvid::cli
