// The family entries registry.cc lists: each is defined in its own file.
#pragma once

#include "corvid/models/registry.h"

namespace corvid {

Family llama_family();    // llama, mistral, qwen2, qwen3 (llama.cc)
Family gemma3_family();   // gemma3_text (gemma3.cc)
Family olmo2_family();    // olmo2 (olmo2.cc)
Family granite_family();  // granite (granite.cc)
Family smollm3_family();  // smollm3 (smollm3.cc)
Family phi3_family();     // phi3 (phi3.cc)
Family gemma4_family();   // gemma4_text (gemma4.cc)
Family qwen_moe_family(); // qwen3_moe, qwen2_moe (qwen_moe.cc)
Family bert_family();     // bert: an encoder, for embeddings (bert.cc)

}  // namespace corvid
