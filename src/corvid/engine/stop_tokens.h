// The token ids that end a generation, read from the checkpoint's metadata. The CLI, the
// server and the Engine all stop on this one set.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "corvid/formats/model_config.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid {

class ChatTemplate;

// The union of
//  - tokenizer->eos_ids(): a GGUF's tokenizer.ggml.eos/eot/eom_token_id, or
//    tokenizer_config.json's eos_token;
//  - config.eos_token_ids: config.json's eos_token_id (a GGUF's eos and eot ids);
//  - generation->eos_token_ids: generation_config.json's eos_token_id, where Llama 3,
//    Gemma and Qwen list their end-of-turn tokens beside EOS;
//  - the end-of-text token of a byte-level BPE vocabulary, a special "<|endoftext|>"
//    (GPT-2's document separator, kept by StarCoder, SmolLM, Qwen, Phi): instruct
//    checkpoints name their chat marker as EOS instead, but the model still ends a
//    plain-text document with it, and no metadata field records that role;
//  - with a chat template, the special token it writes right after an assistant
//    message (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>): the model ends its turns
//    with it, and older GGUFs and folders without generation_config.json do not name
//    it as EOS.
// Ids outside the model's vocabulary are left out (a request with one would be
// rejected). Sorted, without repeats. All but `config` may be null.
std::vector<int32_t> stop_token_ids(const Tokenizer* tokenizer, const ModelConfig& config,
                                    const GenerationConfig* generation = nullptr,
                                    const ChatTemplate* chat_template = nullptr);

// The special token `chat_template` writes right after an assistant message's content,
// if any (the template is rendered on a two-message conversation to see).
std::optional<int32_t> end_of_turn_id(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

}  // namespace corvid
