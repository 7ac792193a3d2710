# Writes OUT, a C++ file defining `std::string_view NAMESPACE::FUNCTION()` that returns the
# bytes of IN (a text file: the web chat page), so the binary serves it with no file beside it.
#   cmake -DIN=page.html -DOUT=page.cc -DNAMESPACE=corvid::server -DFUNCTION=web_chat_page -P embed_text.cmake
file(READ "${IN}" text)
set(delimiter "corvid_embedded")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )${delimiter}\"")
endif()
file(WRITE "${OUT}"
  "// Generated from ${IN} by cmake/embed_text.cmake; edit that file instead.\n"
  "#include <string_view>\n\n"
  "namespace ${NAMESPACE} {\n\n"
  "std::string_view ${FUNCTION}() {\n"
  "  static constexpr std::string_view text = R\"${delimiter}(${text})${delimiter}\";\n"
  "  return text;\n"
  "}\n\n"
  "}  // namespace ${NAMESPACE}\n")
