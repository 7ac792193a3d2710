#include "corvid/server/embeddings_api.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "corvid/engine/pooling.h"

namespace corvid::server {

namespace {

// A token list from a JSON array of integers, each inside the vocabulary.
std::vector<int32_t> token_list(const Json& ids, int64_t vocab, const std::string& where) {
  std::vector<int32_t> out;
  for (const Json& id : ids) {
    if (!id.is_number_integer()) bad("input", "'" + where + "' must hold token ids (integers)");
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= vocab)
      bad("input", "'" + where + "' holds token id " + std::to_string(v) + ", outside the vocabulary [0, " +
                       std::to_string(vocab) + ")");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) bad("input", "'" + where + "' is an empty token list");
  return out;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const Json& body, const Tokenizer& tokenizer, const PoolingConfig& pooling,
                                           int64_t model_dimensions) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  only_fields(body, {"model", "input", "encoding_format", "dimensions", "user", "add_special_tokens"});
  EmbeddingsRequest r;
  r.model = string_field(body, "model").value_or("");
  const bool add_special = boolean(body, "add_special_tokens").value_or(true);
  const Json* input = field(body, "input");
  if (!input) bad("input", "'input' is required: a string, a list of strings, or token ids");
  const int64_t vocab = tokenizer.vocab_size();
  auto text = [&](const Json& s, const std::string& where) {
    const std::string& t = s.get_ref<const std::string&>();
    if (t.empty()) bad("input", "'" + where + "' is an empty string");
    r.inputs.push_back(tokenizer.encode(t, add_special));
    if (r.inputs.back().empty()) bad("input", "'" + where + "' gives no tokens");
  };
  if (input->is_string()) {
    text(*input, "input");
  } else if (input->is_array()) {
    if (input->empty()) bad("input", "'input' is an empty list");
    if (input->size() > kMaxEmbeddingInputs) too_many("input", input->size(), kMaxEmbeddingInputs, "inputs");
    if ((*input)[0].is_number_integer()) {
      r.inputs.push_back(token_list(*input, vocab, "input"));  // one input as token ids
    } else {
      for (size_t i = 0; i < input->size(); ++i) {
        const Json& item = (*input)[i];
        const std::string where = "input[" + std::to_string(i) + "]";
        if (item.is_string()) {
          text(item, where);
        } else if (item.is_array()) {
          r.inputs.push_back(token_list(item, vocab, where));
        } else {
          bad("input", "'" + where + "' must be a string or a list of token ids");
        }
      }
    }
  } else {
    bad("input", "'input' must be a string, a list of strings, or token ids");
  }
  if (const std::optional<std::string> format = string_field(body, "encoding_format")) {
    if (*format != "float" && *format != "base64")
      bad("encoding_format", "'encoding_format' must be 'float' or 'base64', not '" + *format + "'");
    r.base64 = *format == "base64";
  }
  if (const std::optional<int64_t> dims = integer(body, "dimensions", 1, model_dimensions)) {
    if (*dims != model_dimensions) {
      if (!pooling.matryoshka)
        bad("dimensions", "this model gives " + std::to_string(model_dimensions) +
                              "-dimensional embeddings and was not trained to be shortened (no matryoshka "
                              "dimensions in its config.json)");
      if (!pooling.dimensions.empty() &&
          std::find(pooling.dimensions.begin(), pooling.dimensions.end(), *dims) == pooling.dimensions.end()) {
        std::string list;
        for (int64_t d : pooling.dimensions) list += (list.empty() ? "" : ", ") + std::to_string(d);
        bad("dimensions", "'dimensions' must be one of the model's matryoshka dimensions: " + list);
      }
      r.dimensions = *dims;
    }
  }
  return r;
}

std::string base64_floats(const std::vector<float>& values) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static_assert(std::endian::native == std::endian::little, "float32 bytes are written as the host lays them out");
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = (v << 8) | (k < left ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= left ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

Json embeddings_response(const std::vector<std::vector<float>>& vectors, const std::vector<int64_t>& tokens,
                         const EmbeddingsRequest& request, const std::string& model_name) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float> v = request.dimensions ? truncate_embedding(vectors[i], *request.dimensions) : vectors[i];
    Json item{{"object", "embedding"}, {"index", i}};
    if (request.base64) {
      item["embedding"] = base64_floats(v);
    } else {
      item["embedding"] = v;
    }
    data.push_back(std::move(item));
  }
  int64_t total = 0;
  for (int64_t t : tokens) total += t;
  return Json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model_name},
              {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}};
}

}  // namespace corvid::server
