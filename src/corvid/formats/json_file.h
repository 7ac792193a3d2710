// Reads a whole JSON file (config.json, index files) with errors in corvid's
// "<path>: <problem>" form.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace corvid {

// Throws corvid::Error("<path>: ...") when the file cannot be read or is not valid JSON.
nlohmann::json read_json_file(const std::string& path);

}  // namespace corvid
