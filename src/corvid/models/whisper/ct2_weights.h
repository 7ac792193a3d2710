// A CTranslate2 Whisper model.bin seen as a WeightSet under transformers' names, so
// that one loader (WeightLoader) serves both formats. CTranslate2 fuses the
// self-attention's q|k|v and the cross-attention's k|v into one matrix each; the
// parts become row views of it. Its key biases (stored as zeros: HF Whisper's k_proj
// has none) are dropped, which is exact whatever they hold: a key bias adds q·b to
// every score of a query alike, and softmax ignores a constant. One-dimensional
// tensors (biases, LayerNorm weights) become F32 copies, the dtype the norms read.
#pragma once

#include <memory>

#include "corvid/formats/ctranslate2.h"
#include "corvid/formats/weights.h"
#include "corvid/models/whisper/whisper_config.h"

namespace corvid {

WeightSet whisper_weights_from_ct2(std::shared_ptr<const Ct2File> file, const WhisperConfig& config);

}  // namespace corvid
