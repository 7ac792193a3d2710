// ApiServer's side of structured output: one compiler of formats over the model's
// vocabulary (made on first use), and what a request held to a format needs besides
// its compiled format: free reasoning before it, and a parser that reads a forced
// tool call out of the answer.
#include "corvid/server/api_server.h"

namespace corvid::server {

const FormatCompiler& ApiServer::formats() const {
  std::lock_guard<std::mutex> lock(formats_mutex_);
  if (!formats_) formats_ = std::make_unique<FormatCompiler>(tokenizer_, engine_->vocab_size());
  return *formats_;
}

void ApiServer::constrain(GenerationRequest& request, const std::optional<OutputFormat>& format,
                          chat::OutputParserOptions* options, const std::optional<ToolForcing>& forcing,
                          const Json& tools) const {
  if (!format) return;
  try {
    request.format = formats().compile(*format);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), forcing ? "tools" : "response_format");
  }
  if (!options) return;
  if (options->starts_in_reasoning && options->reasoning != chat::ReasoningFormat::kNone)
    request.format_after = tokenizer_.encode(reasoning_close_marker(options->reasoning), /*add_special_tokens=*/false);
  if (forcing) {
    options->tools_format = forcing->mode == ToolForcing::Mode::Named ? chat::ToolFormat::kForcedNamed
                                                                      : chat::ToolFormat::kForcedList;
    options->tools = Json::array();
    for (const Json& t : tools)
      if (forcing->mode == ToolForcing::Mode::Required || t["function"].value("name", "") == forcing->name)
        options->tools.push_back(nlohmann::json::parse(t.dump()));  // the parser's json type
  }
}

}  // namespace corvid::server
