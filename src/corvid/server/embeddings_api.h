// OpenAI's embeddings API on the wire: POST /v1/embeddings bodies parsed (and
// tokenized) into what the embedder runs, and its vectors written back as OpenAI
// does (floats, or base64 of little-endian float32). Fields: model, input (a string,
// a list of strings, a token list, or a list of token lists), encoding_format,
// dimensions, user (ignored, as OpenAI only logs it), and vLLM's add_special_tokens;
// any other field is a 400 naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "corvid/engine/pooling.h"
#include "corvid/server/request_fields.h"
#include "corvid/tokenizer/tokenizer.h"

namespace corvid::server {

constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request

struct EmbeddingsRequest {
  std::string model;
  std::vector<std::vector<int32_t>> inputs;  // token ids, one list per input
  bool base64 = false;
  std::optional<int64_t> dimensions;  // set only when it differs from the model's own
};

// A 400 naming the field for anything malformed, and for a `dimensions` the model was
// not trained to be cut to (PoolingConfig::matryoshka / dimensions).
EmbeddingsRequest parse_embeddings_request(const Json& body, const Tokenizer& tokenizer, const PoolingConfig& pooling,
                                           int64_t model_dimensions);

// OpenAI's response: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
Json embeddings_response(const std::vector<std::vector<float>>& vectors, const std::vector<int64_t>& tokens,
                         const EmbeddingsRequest& request, const std::string& model_name);

// The little-endian float32 bytes of `values` in standard base64 (what numpy's
// frombuffer(base64decode(s), dtype=float32) reads back).
std::string base64_floats(const std::vector<float>& values);

}  // namespace corvid::server
