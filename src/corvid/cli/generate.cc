// corvid generate / corvid chat: prompts go through the model's own chat template
// (transformers' apply_chat_template), replies through its family's output parser.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "corvid/cli/chat_io.h"
#include "corvid/cli/common.h"
#include "corvid/core/error.h"

namespace corvid::cli {

namespace {

using Json = nlohmann::ordered_json;

struct GenerateArgs {
  CommonOptions common;
  SamplingFlags sampling;
  std::string prompt;
  std::string system;
  std::string kwargs = "{}";
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

Json template_kwargs(const GenerateArgs& a) {
  Json kwargs;
  try {
    kwargs = Json::parse(a.kwargs);
  } catch (const Json::exception& e) {
    fail("--kwargs: invalid JSON (", e.what(), ")");
  }
  CORVID_CHECK(kwargs.is_object(), "--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  return kwargs;
}

Json first_messages(const GenerateArgs& a) {
  Json messages = Json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  return messages;
}

void run_generate(GenerateArgs& a, const CLI::App& cmd) {
  apply_common_options(a.common);
  LoadedModel m = load_model(a.common);
  const Tokenizer& tok = *m.tokenizer;
  std::optional<ChatTemplate> tmpl = a.raw ? std::nullopt : load_chat_template(a.common.model);
  if (!a.raw && !tmpl) std::fprintf(stderr, "(the model has no chat template: the prompt goes in as raw text)\n");
  RenderedPrompt prompt;
  if (tmpl) {
    Json messages = first_messages(a);
    messages.push_back({{"role", "user"}, {"content", a.prompt}});
    prompt = render_prompt(*tmpl, tok, messages, template_kwargs(a));
  } else {
    prompt.text = a.prompt;
    prompt.ids = tok.encode(a.prompt, /*add_special_tokens=*/true);
  }
  CORVID_CHECK(!prompt.ids.empty(), "the prompt is empty and the model adds no BOS token; give a prompt");
  GenerateOptions opts;
  opts.max_new_tokens = a.max_tokens;
  opts.sampling = sampling_params(a.sampling, cmd, m.files->generation);
  if (!a.ignore_eos) opts.stop_ids = stop_token_ids(m, tmpl ? &*tmpl : nullptr);
  Session session(*m.runner, context_size(a, m.model->config(), static_cast<int64_t>(prompt.ids.size()) + a.max_tokens),
                  kv_cache_format(a.common, m.model->device()), kv_layer_formats(a.common, *m.model),
                  a.common.kv_quant_start);
  ReplyPrinter printer(tok, opts.stop_ids, tmpl ? tmpl->source(ChatRequest{}) : std::string(), prompt.text);
  printer.prime(prompt.ids);  // so the first word keeps its leading space (SentencePiece)
  std::vector<int32_t> generated;
  GenerationStats stats = session.generate(prompt.ids, opts, [&](int32_t id) {
    generated.push_back(id);
    return a.print_ids ? true : printer.push(id);
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
  std::optional<ChatTemplate> tmpl = load_chat_template(a.common.model);
  CORVID_CHECK(tmpl.has_value(), a.common.model, ": the model has no chat template; use `corvid generate --raw`");
  const std::string source = tmpl->source(ChatRequest{});
  const Json kwargs = template_kwargs(a);
  GenerateOptions opts;
  opts.max_new_tokens = a.max_tokens;
  opts.sampling = sampling_params(a.sampling, cmd, m.files->generation);
  opts.stop_ids = stop_token_ids(m, &*tmpl);
  Session session(*m.runner, context_size(a, m.model->config(), 0), kv_cache_format(a.common, m.model->device()),
                  kv_layer_formats(a.common, *m.model), a.common.kv_quant_start);
  std::fprintf(stderr, "corvid chat: %s (%s). Type a message; an empty line or Ctrl-D ends.\n",
               a.common.model.c_str(), m.model->config().architecture.c_str());
  Json messages = first_messages(a);
  for (std::string line;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    messages.push_back({{"role", "user"}, {"content", line}});
    // The whole conversation is rendered again each turn (templates may rewrite earlier
    // turns); the session keeps the keys/values of the prefix that did not change.
    const RenderedPrompt prompt = render_prompt(*tmpl, tok, messages, kwargs);
    const std::vector<int32_t> fresh = session.continue_from(prompt.ids);
    const int64_t room = session.context_size() - static_cast<int64_t>(prompt.ids.size());
    if (room < 2) {
      std::fprintf(stderr, "(context full: %lld tokens; start a new chat)\n", static_cast<long long>(session.context_size()));
      break;
    }
    GenerateOptions turn = opts;
    turn.max_new_tokens = std::min<int64_t>(opts.max_new_tokens, room - 1);
    ReplyPrinter printer(tok, opts.stop_ids, source, prompt.text);
    printer.prime(prompt.ids);
    GenerationStats stats = session.generate(fresh, turn, [&](int32_t id) { return printer.push(id); });
    const chat::ParsedOutput reply = printer.finish();
    std::printf("\n");  // each answer ends its line, also when stdout is not a terminal
    Json answer = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.reasoning_content.empty()) answer["reasoning_content"] = reply.reasoning_content;
    messages.push_back(answer);
    print_stats(stats);
  }
}

void add_generate_flags(CLI::App* cmd, GenerateArgs& a) {
  add_common_options(*cmd, a.common);
  add_sampling_options(*cmd, a.sampling);
  cmd->add_option("-n,--max-tokens", a.max_tokens, "most tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("-c,--context", a.context, "context size in tokens (default: what the request needs, at least 4096, at most the model's)");
  cmd->add_option("--system", a.system, "system message");
  cmd->add_option("--kwargs", a.kwargs, "extra chat-template variables as JSON, e.g. '{\"enable_thinking\": false}'");
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  add_generate_flags(cmd, *args);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (a chat message unless --raw)")->required();
  cmd->add_flag("--raw", args->raw, "feed the prompt as is, without the model's chat template");
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
