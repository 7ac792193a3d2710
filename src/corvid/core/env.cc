#include "corvid/core/env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace corvid {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < INT_MIN || n > INT_MAX) return fallback;
  return static_cast<int>(n);
}

}  // namespace corvid
