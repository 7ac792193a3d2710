// corvid embed: the embeddings of texts (one JSON list of vectors on stdout), pooled
// as the model's own files say (engine/pooling.h), through the same embedder the
// server's --task embed runs.
#include <cstdio>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "corvid/cli/common.h"
#include "corvid/core/error.h"
#include "corvid/engine/embedder.h"
#include "corvid/engine/pooling.h"

namespace corvid::cli {

namespace {

struct EmbedArgs {
  CommonOptions common;
  std::vector<std::string> texts;
  int64_t dimensions = 0;
};

void run_embed(const EmbedArgs& a) {
  apply_common_options(a.common);
  LoadedModel m = load_model(a.common);
  const PoolingConfig pooling = read_pooling(a.common.model, m.model->state_spec().empty());
  EmbedderConfig config;
  config.kv_format = kv_cache_format(a.common, m.model->device());
  check_embedding_cache(a.common, config.kv_format, "embed");
  Embedder embedder(m, pooling, config);
  CORVID_CHECK(a.dimensions == 0 || pooling.matryoshka || a.dimensions == embedder.dimensions(), "--dimensions: ",
               a.common.model, " gives ", embedder.dimensions(),
               "-dimensional embeddings and was not trained to be shortened");
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& t : a.texts) {
    const std::string text =
        t == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()) : t;
    inputs.push_back(m.tokenizer->encode(text, /*add_special_tokens=*/true));
  }
  std::vector<std::vector<float>> vectors = embedder.embed(std::move(inputs));
  nlohmann::json out = nlohmann::json::array();
  for (const std::vector<float>& v : vectors)
    out.push_back(a.dimensions > 0 && a.dimensions != embedder.dimensions() ? truncate_embedding(v, a.dimensions) : v);
  std::printf("%s\n", out.dump().c_str());
  std::fprintf(stderr, "corvid embed: %zu inputs, %lld dimensions, %s\n", vectors.size(),
               static_cast<long long>(out.empty() ? 0 : out[0].size()), pooling.describe().c_str());
}

}  // namespace

void register_embed(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand("embed", "Print the embeddings of texts as a JSON list of vectors");
  add_common_options(*cmd, args->common);
  cmd->add_option("texts", args->texts, "texts to embed (\"-\" reads stdin)")->required();
  cmd->add_option("--dimensions", args->dimensions, "keep the first N dimensions, renormalised (Matryoshka models)")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { run_embed(*args); });
}

}  // namespace corvid::cli
