// libFuzzer target: GGUF parsing from memory, then everything a loader does with
// a parsed file (typed getters, ModelConfig, the HF-named WeightSet). A
// corvid::Error is the expected outcome for bad input; a crash, a sanitizer
// report or any other exception is a finding.
#include <cstddef>
#include <cstdint>

#include "corvid/core/error.h"
#include "corvid/formats/gguf.h"
#include "corvid/formats/gguf_model.h"

using namespace corvid;

namespace {

// Reads the first and last byte of every tensor so ASan sees any view that
// points outside the input.
uint8_t touch(const GgufFile& f) {
  uint8_t acc = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.view.data);
    size_t n = t.view.nbytes();
    if (n) acc ^= p[0] ^ p[n - 1];
  }
  return acc;
}

void exercise_getters(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata()) {
    try { (void)f.get_int(key); } catch (const Error&) {}
    try { (void)f.get_float(key); } catch (const Error&) {}
    try { (void)f.get_string(key); } catch (const Error&) {}
    try { (void)f.get_bool(key); } catch (const Error&) {}
    try { (void)f.get_int_array(key); } catch (const Error&) {}
    try { (void)f.get_float_array(key); } catch (const Error&) {}
    try { (void)f.get_string_array(key); } catch (const Error&) {}
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<GgufFile> f;
  try {
    f = GgufFile::parse(nullptr, data, size, "fuzz.gguf");
  } catch (const Error&) {
    return 0;
  }
  volatile uint8_t sink = touch(*f);
  (void)sink;
  exercise_getters(*f);
  try { (void)model_config_from_gguf(*f); } catch (const Error&) {}
  try { (void)gguf_weight_set(f); } catch (const Error&) {}
  return 0;
}
