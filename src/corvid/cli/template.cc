// corvid template: render a conversation with the model's chat template, exactly as
// transformers' apply_chat_template(tokenize=False) would (nothing added, no newline).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "corvid/chat/chat_template.h"
#include "corvid/cli/common.h"
#include "corvid/core/error.h"

namespace corvid::cli {

namespace {

struct TemplateArgs {
  std::string model;
  std::string messages_path;
  std::string tools_path;
  std::string kwargs = "{}";
  std::string date;
  std::string template_path;
  std::string template_name;
  bool no_generation_prompt = false;
  bool continue_final_message = false;
};

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  return read_text_file(path, "corvid template");
}

jinja::Json parse_json(const std::string& text, const std::string& what) {
  try {
    return jinja::Json::parse(text);
  } catch (const jinja::Json::exception& e) {
    fail(what, ": invalid JSON (", e.what(), ")");
  }
}

void run_template(const TemplateArgs& a) {
  CORVID_CHECK(!a.model.empty() || !a.template_path.empty(), "give the model (-m) or a template (--template)");
  ChatRequest request;
  // --messages: a list of messages, or an object with "messages" (and "tools"), like a chat request body.
  jinja::Json input = parse_json(read_input(a.messages_path), a.messages_path);
  if (input.is_object() && input.contains("messages")) {
    if (input.contains("tools")) request.tools = input["tools"];
    request.messages = input["messages"];
  } else {
    request.messages = input;
  }
  if (!a.tools_path.empty()) request.tools = parse_json(read_input(a.tools_path), a.tools_path);
  request.kwargs = parse_json(a.kwargs, "--kwargs");
  CORVID_CHECK(request.kwargs.is_object(), "--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  request.add_generation_prompt = !a.no_generation_prompt;
  if (a.continue_final_message) {
    request.continue_final_message = "content";
    request.add_generation_prompt = false;  // continuing the last message never opens a new one
  }
  request.template_name = a.template_name;
  if (!a.date.empty()) request.now = ChatTemplate::parse_date(a.date);

  std::unique_ptr<ChatTemplate> tmpl;
  if (!a.template_path.empty()) {
    jinja::Json special = a.model.empty() ? jinja::Json::object() : ChatTemplate::special_tokens_of_model(a.model);
    tmpl = std::make_unique<ChatTemplate>(read_input(a.template_path), std::move(special));
  } else {
    tmpl = std::make_unique<ChatTemplate>(ChatTemplate::from_model(a.model));
  }
  const std::string prompt = tmpl->render(request);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void register_template(CLI::App& app) {
  auto args = std::make_shared<TemplateArgs>();
  CLI::App* t = app.add_subcommand("template", "Print the prompt the model's chat template makes of a conversation");
  t->add_option("-m,--model", args->model, "GGUF file or Hugging Face folder (template and special tokens)");
  t->add_option("--messages", args->messages_path, "JSON file with the messages (or {\"messages\", \"tools\"}); - for stdin")
      ->required();
  t->add_option("--tools", args->tools_path, "JSON file with the tool schemas");
  t->add_flag("--no-generation-prompt", args->no_generation_prompt, "do not open an assistant turn at the end");
  t->add_flag("--continue-final-message", args->continue_final_message,
              "leave the final message open for the model to continue (implies --no-generation-prompt)");
  t->add_option("--kwargs", args->kwargs, "extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
  t->add_option("--date", args->date, "the date strftime_now sees, YYYY-MM-DD (default: today)");
  t->add_option("--template", args->template_path, "use this Jinja file instead of the model's template");
  t->add_option("--template-name", args->template_name, "pick a named template of the model (e.g. tool_use)");
  t->callback([args] { run_template(*args); });
}

}  // namespace corvid::cli
