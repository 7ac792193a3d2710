// libFuzzer target: CTranslate2 model.bin parsing from memory. A corvid::Error is the
// expected outcome for bad input; a crash, a sanitizer report or any other exception is
// a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "corvid/core/error.h"
#include "corvid/formats/ctranslate2.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<Ct2File> f;
  try {
    f = Ct2File::parse(std::span<const uint8_t>(data, size), "fuzz.bin");
  } catch (const Error&) {
    return 0;
  }
  // Touch the first and last byte of every variable so ASan sees any view outside the copy.
  uint8_t acc = 0;
  for (const auto& [name, v] : f->variables()) {
    const size_t bytes = v.view.ndim == 0 ? 0 : v.view.nbytes();
    if (v.dtype_id != 1 && v.dtype_id != 2 && bytes > 0) {
      const auto* p = static_cast<const uint8_t*>(v.view.data);
      acc ^= p[0] ^ p[bytes - 1];
    }
    if (f->find(name) != &v) __builtin_trap();
    try {
      (void)f->scalar(name);
    } catch (const Error&) {
    }
  }
  for (const auto& [alias, target] : f->aliases())
    if (!f->find(alias)) __builtin_trap();
  volatile uint8_t sink = acc;
  (void)sink;
  return 0;
}
