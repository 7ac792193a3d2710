// libFuzzer target: safetensors parsing from memory. A corvid::Error is the
// expected outcome for bad input; a crash, a sanitizer report or any other
// exception (nlohmann's included) is a finding.
#include <cstddef>
#include <cstdint>

#include "corvid/core/error.h"
#include "corvid/formats/safetensors.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<SafetensorsFile> f;
  try {
    f = SafetensorsFile::parse(nullptr, data, size, "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  // Touch the first and last byte of every tensor so ASan sees any view that
  // points outside the input.
  uint8_t acc = 0;
  for (const SafetensorsTensor& t : f->tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.view.data);
    if (t.end > t.begin) acc ^= p[0] ^ p[t.end - t.begin - 1];
    if (t.dtype && t.view.nbytes() != t.end - t.begin) __builtin_trap();  // view must match the header range
    if (f->find(t.name) != &t) __builtin_trap();
  }
  volatile uint8_t sink = acc;
  (void)sink;
  return 0;
}
