// WeightSet: the tensors of one checkpoint keyed by their Hugging Face names
// ("model.layers.0.self_attn.q_proj.weight"), whatever the file format. GGUF
// names are mapped onto these at load. The views point into memory-mapped
// files that `owners` keeps alive.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "corvid/core/tensor.h"

namespace corvid {

struct WeightSet {
  std::map<std::string, Tensor> tensors;
  std::vector<std::shared_ptr<const void>> owners;
  std::string source;  // file or folder, for error messages

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  // Throws corvid::Error("<source>: missing tensor <name>") when absent.
  const Tensor& get(const std::string& name) const;
};

}  // namespace corvid
