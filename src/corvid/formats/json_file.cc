#include "corvid/formats/json_file.h"

#include "corvid/core/error.h"
#include "corvid/core/mapped_file.h"
#include "corvid/formats/printable.h"

namespace corvid {

nlohmann::json read_json_file(const std::string& path) {
  auto file = MappedFile::open(path);
  const char* p = reinterpret_cast<const char*>(file->data());
  try {
    return nlohmann::json::parse(p, p + file->size());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages are one line; printable() guards the quoted input it may include.
    fail(path, ": bad JSON: ", printable(e.what(), 200));
  }
}

}  // namespace corvid
