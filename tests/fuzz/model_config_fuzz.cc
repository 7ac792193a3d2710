// libFuzzer target: config.json and generation_config.json interpretation on
// arbitrary JSON. Invalid JSON is skipped (nlohmann's concern); for valid JSON a
// corvid::Error is expected, anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "corvid/core/error.h"
#include "corvid/formats/model_config.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    ModelConfig c = parse_model_config(j, "fuzz/config.json");
    // Invariants every successful parse must hold: model code divides by these.
    if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0 || c.head_dim <= 0 ||
        c.rotary_dim <= 0 || c.rotary_dim > c.head_dim)
      __builtin_trap();
  } catch (const Error&) {
  }
  try { (void)parse_generation_config(j, "fuzz/generation_config.json"); } catch (const Error&) {}
  return 0;
}
