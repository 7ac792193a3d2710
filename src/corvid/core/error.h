// Error handling: corvid reports failures as corvid::Error exceptions whose
// message is one line naming the subject (file, tensor, request) and the problem.
// Entry points (CLI, server) catch them; nothing below them prints or exits.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace corvid {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the message from any streamable parts: fail("x.gguf: tensor ", name, " truncated").
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

}  // namespace corvid

#define CORVID_CHECK(cond, ...)         \
  do {                                  \
    if (!(cond)) ::corvid::fail(__VA_ARGS__); \
  } while (0)
