#include "corvid/engine/pooling.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "corvid/core/error.h"

namespace corvid {

namespace fs = std::filesystem;

namespace {

std::optional<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": not valid JSON (", e.what(), ")");
  }
}

bool flag(const nlohmann::json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  CORVID_CHECK(it->is_boolean(), source, ": field ", key, " must be a bool");
  return it->get<bool>();
}

// modules.json: the pooling module's folder, and whether a Normalize module follows.
struct Modules {
  std::string pooling_path;
  bool normalize = false;
};

Modules read_modules(const fs::path& dir) {
  Modules m;
  const fs::path file = dir / "modules.json";
  const std::optional<nlohmann::json> j = read_json(file);
  if (!j) return m;
  CORVID_CHECK(j->is_array(), file.string(), ": must be a list of modules");
  for (const nlohmann::json& module : *j) {
    CORVID_CHECK(module.is_object() && module.contains("type") && module["type"].is_string(), file.string(),
                 ": every module needs a type");
    const std::string type = module["type"].get<std::string>();
    const std::string path = module.value("path", std::string());
    if (type.ends_with(".Transformer")) continue;
    if (type.ends_with(".Pooling")) {
      m.pooling_path = path;
    } else if (type.ends_with(".Normalize")) {
      m.normalize = true;
    } else {
      // A Dense projection (or anything else) after pooling changes the embedding: running
      // without it would answer with other vectors than the model's.
      fail(file.string(), ": module ", type, " is not supported (Transformer, Pooling and Normalize are)");
    }
  }
  return m;
}

PoolingMode read_mode(const nlohmann::json& j, const std::string& source) {
  struct Named {
    const char* key;
    PoolingMode mode;
  };
  static const Named kModes[] = {{"pooling_mode_mean_tokens", PoolingMode::Mean},
                                 {"pooling_mode_cls_token", PoolingMode::Cls},
                                 {"pooling_mode_max_tokens", PoolingMode::Max},
                                 {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::MeanSqrtLen},
                                 {"pooling_mode_lasttoken", PoolingMode::LastToken}};
  std::optional<PoolingMode> mode;
  for (const Named& n : kModes)
    if (flag(j, n.key, source)) {
      CORVID_CHECK(!mode, source, ": more than one pooling mode (their concatenation) is not supported");
      mode = n.mode;
    }
  CORVID_CHECK(!flag(j, "pooling_mode_weightedmean_tokens", source), source,
               ": weighted-mean pooling is not supported");
  CORVID_CHECK(mode, source, ": no pooling mode is set");
  return *mode;
}

}  // namespace

std::string PoolingConfig::describe() const {
  const char* names[] = {"mean", "cls", "max", "mean-sqrt-len", "last-token"};
  return std::string(names[static_cast<int>(mode)]) + " pooling" + (normalize ? ", normalized" : "");
}

PoolingConfig read_pooling(const std::string& model_path, bool encoder) {
  PoolingConfig c;
  const fs::path dir(model_path);
  if (!fs::is_directory(dir)) {  // a GGUF file, or a config.json with dummy weights: the family's usual pooling
    c.mode = encoder ? PoolingMode::Mean : PoolingMode::LastToken;
    return c;
  }
  const Modules modules = read_modules(dir);
  c.normalize = modules.normalize || !fs::exists(dir / "modules.json");
  const fs::path pooling = dir / modules.pooling_path / "config.json";
  if (!modules.pooling_path.empty() || fs::exists(dir / "1_Pooling" / "config.json")) {
    const fs::path file = modules.pooling_path.empty() ? dir / "1_Pooling" / "config.json" : pooling;
    const std::optional<nlohmann::json> j = read_json(file);
    CORVID_CHECK(j && j->is_object(), file.string(), ": missing or not a JSON object");
    c.mode = read_mode(*j, file.string());
  } else {
    // No sentence-transformers files: BERT's usual mean, a decoder's last token.
    c.mode = encoder ? PoolingMode::Mean : PoolingMode::LastToken;
  }
  if (const std::optional<nlohmann::json> j = read_json(dir / "sentence_bert_config.json")) {
    auto it = j->find("max_seq_length");
    if (it != j->end() && !it->is_null()) {
      CORVID_CHECK(it->is_number_integer() && it->get<int64_t>() > 0, (dir / "sentence_bert_config.json").string(),
                   ": max_seq_length must be a positive integer");
      c.max_tokens = it->get<int64_t>();
    }
  }
  if (const std::optional<nlohmann::json> j = read_json(dir / "config.json")) {
    const std::string source = (dir / "config.json").string();
    c.matryoshka = flag(*j, "is_matryoshka", source);
    auto it = j->find("matryoshka_dimensions");
    if (it != j->end() && !it->is_null()) {
      CORVID_CHECK(it->is_array(), source, ": matryoshka_dimensions must be a list of integers");
      for (const nlohmann::json& d : *it) {
        CORVID_CHECK(d.is_number_integer() && d.get<int64_t>() > 0, source,
                     ": matryoshka_dimensions must be a list of positive integers");
        c.dimensions.push_back(d.get<int64_t>());
      }
      c.matryoshka = true;
    }
  }
  CORVID_CHECK(encoder || c.mode == PoolingMode::LastToken, model_path, ": a decoder embeds with last-token pooling only, not ",
               c.describe());
  return c;
}

std::vector<float> pool_hidden(const float* hidden, int64_t rows, int64_t dim, const PoolingConfig& config) {
  CORVID_CHECK(rows > 0 && dim > 0, "pool_hidden: no hidden states");
  std::vector<double> acc(static_cast<size_t>(dim), 0.0);
  auto row = [&](int64_t r) { return hidden + r * dim; };
  switch (config.mode) {
    case PoolingMode::Cls:
      std::copy(row(0), row(0) + dim, acc.begin());
      break;
    case PoolingMode::LastToken:
      std::copy(row(rows - 1), row(rows - 1) + dim, acc.begin());
      break;
    case PoolingMode::Max:
      std::copy(row(0), row(0) + dim, acc.begin());
      for (int64_t r = 1; r < rows; ++r)
        for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] = std::max<double>(acc[static_cast<size_t>(d)], row(r)[d]);
      break;
    case PoolingMode::Mean:
    case PoolingMode::MeanSqrtLen: {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += row(r)[d];
      const double divisor = config.mode == PoolingMode::Mean ? static_cast<double>(rows) : std::sqrt(static_cast<double>(rows));
      for (double& v : acc) v /= divisor;
      break;
    }
  }
  std::vector<float> out(acc.begin(), acc.end());
  if (!config.normalize) return out;
  double norm = 0;
  for (double v : acc) norm += v * v;
  const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);  // torch.nn.functional.normalize's eps
  for (size_t d = 0; d < out.size(); ++d) out[d] = static_cast<float>(acc[d] * scale);
  return out;
}

std::vector<float> truncate_embedding(const std::vector<float>& embedding, int64_t dimensions) {
  CORVID_CHECK(dimensions > 0 && dimensions <= static_cast<int64_t>(embedding.size()), "dimensions ", dimensions,
               " must be in [1, ", embedding.size(), "]");
  std::vector<float> out(embedding.begin(), embedding.begin() + dimensions);
  double norm = 0;
  for (float v : out) norm += static_cast<double>(v) * v;
  const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);
  for (float& v : out) v = static_cast<float>(v * scale);
  return out;
}

}  // namespace corvid
