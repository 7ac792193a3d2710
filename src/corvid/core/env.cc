#include "corvid/core/env.h"

#include <cstdlib>
#include <cstring>

namespace corvid {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace corvid
