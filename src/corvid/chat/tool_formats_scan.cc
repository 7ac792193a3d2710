#include "corvid/chat/tool_formats_scan.h"

#include <algorithm>
#include <string>

namespace corvid::chat {
namespace {

constexpr std::string_view kCdataOpen = "<![CDATA[";
constexpr std::string_view kCdataClose = "]]>";

bool valid_parameter_name(std::string_view name) {
  return !name.empty() && name.find_first_of("<>\"\n") == std::string_view::npos;
}

// The value starting at text[pos], after its name (and value_open); advances pos past
// its close.
std::optional<std::string_view> read_value(std::string_view text, std::size_t& pos,
                                           const ParameterListSyntax& syntax) {
  if (syntax.cdata_values && text.substr(pos).starts_with(kCdataOpen)) {
    const std::size_t begin = pos + kCdataOpen.size();
    const std::size_t end = text.find(kCdataClose, begin);
    if (end == std::string_view::npos) return std::nullopt;
    pos = end + kCdataClose.size();
    if (!text.substr(pos).starts_with(syntax.value_close)) return std::nullopt;
    pos += syntax.value_close.size();
    return text.substr(begin, end - begin);
  }
  const std::size_t close = text.find(syntax.value_close, pos);
  std::size_t end = close;
  if (syntax.value_close_optional && !syntax.list_end.empty())
    end = std::min({close, text.find(syntax.name_open, pos), text.find(syntax.list_end, pos)});
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view value = text.substr(pos, end - pos);
  pos = end == close ? close + syntax.value_close.size() : end;
  if (syntax.strip_newlines) {
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
  }
  return value;
}

}  // namespace

std::optional<std::size_t> scan_parameter_list(std::string_view text, std::size_t pos,
                                               const ParameterListSyntax& syntax, const ParameterTyper& typer,
                                               ParsedCall& call) {
  while (true) {
    pos = skip_spaces(text, pos);
    const std::string_view rest = text.substr(pos);
    if (syntax.list_end.empty() ? rest.empty() : rest.starts_with(syntax.list_end))
      return pos + syntax.list_end.size();
    if (!rest.starts_with(syntax.name_open)) return std::nullopt;
    const std::size_t name_begin = pos + syntax.name_open.size();
    const std::size_t name_end = text.find(syntax.name_close, name_begin);
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string name(trim_spaces(text.substr(name_begin, name_end - name_begin)));
    if (!valid_parameter_name(name)) return std::nullopt;
    pos = name_end + syntax.name_close.size();
    if (!syntax.value_open.empty()) {
      pos = skip_spaces(text, pos);
      if (!text.substr(pos).starts_with(syntax.value_open)) return std::nullopt;
      pos += syntax.value_open.size();
    }
    const std::optional<std::string_view> value = read_value(text, pos, syntax);
    if (!value) return std::nullopt;
    call.arguments[name] = typer.value(call.name, name, *value);
  }
}

}  // namespace corvid::chat
