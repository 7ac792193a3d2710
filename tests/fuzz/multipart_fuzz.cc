// libFuzzer target: multipart/form-data uploads as the audio routes read them. The
// input's first line is the Content-Type header, the rest the body; a form that parses
// goes on through the audio API's field mapping. A corvid::Error (an ApiError among
// them) is the expected outcome for bad input; a crash, a sanitizer report, a part
// outside the body, or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corvid/core/error.h"
#include "corvid/server/audio_api.h"
#include "corvid/server/multipart.h"

using namespace corvid;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const std::string_view content_type = input.substr(0, eol), body = input.substr(eol + 1);
  server::MultipartForm form;
  try {
    form = server::parse_multipart(body, server::multipart_boundary(content_type));
  } catch (const Error&) {
    return 0;
  }
  for (const server::MultipartPart& p : form.parts) {
    // Every part is a view into the body, after its header block.
    if (p.name.empty() || p.body.data() < body.data() || p.body.data() + p.body.size() > body.data() + body.size())
      __builtin_trap();
  }
  for (bool multilingual : {false, true})
    for (std::string_view path : {server::kTranscriptionsPath, server::kTranslationsPath}) {
      try {
        const server::AudioRequest r = server::parse_audio_request(form, path, multilingual);
        if (r.options.temperatures.empty() || r.file.data() < body.data()) __builtin_trap();
      } catch (const Error&) {
      }
    }
  return 0;
}
