#include "corvid/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "corvid/core/error.h"
#include "corvid/tokenizer/unicode.h"

namespace corvid::tok {
namespace {

// Per-thread match state: one JIT stack large enough for long whitespace or
// letter runs (the default 32 KiB can overflow on backtracking patterns).
struct ThreadMatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;
  ThreadMatchState() {
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
    data = pcre2_match_data_create(1, nullptr);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string translate_hf_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail(where, ": regex does not compile at offset ", offset, ": ", reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only; the interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  // PCRE2 is told not to re-check UTF-8 (it would on every call); ill-formed
  // input would then be undefined behaviour, so refuse it here instead.
  CORVID_CHECK(utf8_valid(text), "tokenizer: regex input is not valid UTF-8");
  auto* code = static_cast<pcre2_code*>(code_);
  ThreadMatchState& st = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      fail("tokenizer: regex match failed (", reinterpret_cast<const char*>(msg), ") for pattern ", pattern_);
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one whole character.
      if (b >= text.size()) break;
      pos = b + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace corvid::tok
