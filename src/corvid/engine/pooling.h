// Pooling: how a model's hidden states become one embedding per input, read once
// from the model's own files. A sentence-transformers folder says it in
// modules.json (whether a Normalize module follows), 1_Pooling/config.json (the
// mode) and sentence_bert_config.json (the longest input); a decoder without them
// takes its last token's hidden state, L2-normalised, the convention of decoder
// embedding models (Qwen3-Embedding, e5-mistral). config.json's matryoshka fields
// say whether a shorter `dimensions` may be asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace corvid {

enum class PoolingMode { Mean, Cls, Max, MeanSqrtLen, LastToken };

struct PoolingConfig {
  PoolingMode mode = PoolingMode::LastToken;
  bool normalize = true;            // L2 after pooling (a Normalize module, or a decoder)
  std::optional<int64_t> max_tokens;  // sentence_bert_config.json max_seq_length
  // Truncating to fewer dimensions (then renormalising) is meaningful: the model was
  // trained so (Matryoshka). Empty `dimensions` with `matryoshka` true: any size.
  bool matryoshka = false;
  std::vector<int64_t> dimensions;
  std::string describe() const;  // "mean pooling, normalized"
};

// The pooling a model folder (or GGUF file: last-token) declares. `encoder`: the model
// keeps no per-sequence state (BERT), so its default is mean pooling. Throws
// corvid::Error for modes or files it cannot honour (naming the file).
PoolingConfig read_pooling(const std::string& model_path, bool encoder);

// One input's embedding from its hidden states [rows, dim] (every row of the input,
// or for LastToken only the last one), pooled, and normalised when the config says so.
std::vector<float> pool_hidden(const float* hidden, int64_t rows, int64_t dim, const PoolingConfig& config);

// The first `dimensions` values of `embedding`, renormalised to unit length.
std::vector<float> truncate_embedding(const std::vector<float>& embedding, int64_t dimensions);

}  // namespace corvid
