#include "corvid/formats/weights.h"

#include "corvid/core/error.h"

namespace corvid {

const Tensor& WeightSet::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) fail(source, ": missing tensor ", name);
  return it->second;
}

}  // namespace corvid
