// libFuzzer target: audio decoding from memory (libsndfile behind corvid::audio::decode)
// and the raw-PCM path. A corvid::Error is the expected outcome for bad input; a crash, a
// sanitizer report or any other exception is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "corvid/audio/audio_file.h"
#include "corvid/core/error.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const audio::Audio a = audio::decode(bytes, "fuzz");
    if (a.samples.empty() || a.sample_rate < 1000) __builtin_trap();  // decode promises samples at a sane rate
    float acc = 0;
    for (float s : a.samples) acc += s;
    volatile float sink = acc;
    (void)sink;
  } catch (const Error&) {
  }
  if (size >= 2) {
    try {
      const int channels = 1 + data[0] % 4;
      const auto format = data[1] % 2 ? audio::PcmFormat::F32LE : audio::PcmFormat::S16LE;
      (void)audio::decode_pcm(bytes.subspan(2), 16000, channels, format, "fuzz.pcm");
    } catch (const Error&) {
    }
  }
  return 0;
}
