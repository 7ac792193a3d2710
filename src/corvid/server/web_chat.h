// The chat page the server answers GET / with (src/corvid/server/web/chat.html, compiled
// in by cmake/embed_text.cmake): a self-contained HTML file that uses the server's own
// /v1/models and streaming /v1/chat/completions.
#pragma once

#include <string_view>

namespace corvid::server {

std::string_view web_chat_page();

}  // namespace corvid::server
