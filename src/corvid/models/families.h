// The family entries registry.cc lists: each is defined in its own file.
#pragma once

#include "corvid/models/registry.h"

namespace corvid {

Family llama_family();    // llama, mistral, qwen2, qwen3 (llama.cc)
Family gemma3_family();   // gemma3_text (gemma3.cc)

}  // namespace corvid
