// WeightLoader: the one way a family gets its weights. The family asks for each
// tensor by name and shape (its constructor is the inventory); the loader
// - reads it from the checkpoint (safetensors or GGUF, under HF names), checking the
//   shape, or makes it up (dummy weights: a config alone, for benchmarks at real shapes);
// - puts it on the model's device (uploading in its stored format; GPU row layouts
//   per ops::device_weight_dtype);
// - places weights the family wants to multiply as one matrix (q|k|v, gate|up) back
//   to back on request (fused);
// and at finish() fails on any checkpoint tensor nobody asked for, naming it, so a
// tensor present but unused is a load error rather than a silently wrong model.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "corvid/core/device.h"
#include "corvid/core/tensor.h"
#include "corvid/formats/weights.h"

namespace corvid {

// How a dummy weight is filled (its role in the model).
enum class WeightRole {
  Embedding,   // N(0, 0.02)-like
  Projection,  // std 1/sqrt(in_features)
  Norm,        // 1 ± 0.05 (F32)
  Bias,        // ±0.02 (F32)
};

// Where a model's weights go: its device, and on a GPU how many of its MoE layers keep
// their routed experts in pinned host memory that the kernels read in place
// (--moe-offload: the first N sparse layers; kAllMoeLayers: every one). Only the
// experts a token's router picks cross the host link, so a model larger than the GPU
// runs, at the link's speed for those layers.
struct WeightPlacement {
  static constexpr int kAllMoeLayers = -1;
  Device device = Device::CPU;
  int moe_offload_layers = 0;
  WeightPlacement(Device d = Device::CPU, int moe_offload = 0) : device(d), moe_offload_layers(moe_offload) {}
  bool offloads(int sparse_layer) const {
    return moe_offload_layers == kAllMoeLayers || sparse_layer < moe_offload_layers;
  }
  // How many of a model's `moe_layers` MoE layers the offload takes.
  size_t offloaded_layers(size_t moe_layers) const {
    return moe_offload_layers == kAllMoeLayers ? moe_layers
                                               : std::min(moe_layers, static_cast<size_t>(moe_offload_layers));
  }
};

// What a bound model keeps of its loader: the memory its weight views point into.
struct WeightStorage {
  std::vector<std::shared_ptr<const void>> owners;
  int64_t parameters = 0;         // elements of every weight handed out
  int64_t host_mapped_bytes = 0;  // of those, bytes in pinned host memory (offloaded experts)
};

class WeightLoader {
 public:
  // Weights from a checkpoint (host tensors under HF names; `files` outlives the model).
  // An offload on the CPU is an error (its experts are in host memory already).
  WeightLoader(const WeightSet& files, const WeightPlacement& placement);
  // Made-up weights: matrices in `dtype` (norms and biases F32), deterministic for a seed.
  WeightLoader(std::string source, DType dtype, uint64_t seed, const WeightPlacement& placement);

  const std::string& source() const { return source_; }
  Device device() const { return device_; }
  // Where the routed experts of the model's sparse layer number `sparse_layer` (0 for
  // its first MoE layer) go.
  Residency expert_residency(int sparse_layer) const;
  bool dummy() const { return files_ == nullptr; }
  // Whether families may multiply fused weights as one matrix (fused(); a checkpoint's own
  // fused matrices): off under CORVID_NO_FUSION=1.
  bool fuses() const { return fuse_; }
  // Whether the checkpoint holds `name` (dummy weights: never).
  bool has(const std::string& name) const;

  // A tensor of exactly `shape` (outermost first, as PyTorch stores it). Missing or of
  // another shape: corvid::Error naming the file and the tensor.
  Tensor get(const std::string& name, std::vector<int64_t> shape, WeightRole role = WeightRole::Projection);
  // get() when the checkpoint has it, else an empty tensor (data == nullptr). Dummy
  // weights make it when `dummy_present`.
  Tensor optional(const std::string& name, std::vector<int64_t> shape, WeightRole role, bool dummy_present);
  // A norm weight [size] as F32 on the device, with 1 added to every element when
  // plus_one: (1 + w) norms store w zero-centred (Gemma), and the model then runs the
  // plain x * w norm.
  Tensor norm(const std::string& name, int64_t size, bool plus_one = false);
  // The weight of a norm without one ([size] ones, F32, on the device): a weightless
  // RMSNorm runs as rms_norm with it.
  Tensor ones(int64_t size);

  // Weights the family multiplies as one matrix: each part get()'s own shape (2-D, same
  // columns); `parts` come back in order. On a GPU they are placed back to back and
  // `whole` is the [sum of rows, cols] matrix over them; on the CPU `whole` is set
  // only when the file already holds them back to back with one dtype. With fusion off
  // (CORVID_NO_FUSION=1, for A/B runs) `whole` is always empty.
  struct Fused {
    Tensor whole;
    std::vector<Tensor> parts;
  };
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
  };
  Fused fused(const std::vector<Part>& parts);
  // Per-expert matrices as one stack (a MoE layer's): fused() whatever the fusion switch,
  // so that on a GPU `whole` is always set; on the CPU it is set when the file holds
  // them back to back, else the parts stay views into the file (no copy).
  // `where`: expert_residency()'s answer for the layer.
  Fused stacked(const std::vector<Part>& parts, Residency where = Residency::Device);
  // A 3-D tensor [E, rows, cols] (stacked expert matrices as a file holds them) as the
  // 2-D [E * rows, cols] matrix over them.
  Tensor get_stack(const std::string& name, int64_t experts, int64_t rows, int64_t cols,
                   Residency where = Residency::Device);

  // `bytes` of device memory for the model's own use (not a weight: counts in no
  // parameter total), kept as long as the weights: an I32 tensor of at least `bytes`
  // (raw storage). On the CPU an empty tensor.
  Tensor device_scratch(int64_t bytes);

  // A tensor the family reads once at load (rope frequency factors), as host floats.
  std::vector<float> read_f32(const std::string& name, int64_t count);
  // Names the checkpoint may hold that the model knowingly does without.
  void ignore(const std::string& name);

  // Throws for the first checkpoint tensor no one asked for or ignored; returns the
  // storage the handed-out views point into.
  WeightStorage finish();

 private:
  const Tensor& host(const std::string& name, const std::vector<int64_t>& shape, WeightRole role);
  Tensor place(const Tensor& host_tensor, Residency where = Residency::Device);
  Fused fused_parts(const std::vector<Part>& parts, bool fuse, Residency where);
  std::shared_ptr<DeviceBuffer> allocate(size_t bytes, Residency where);
  const Tensor& make_dummy(const std::string& name, const std::vector<int64_t>& shape, WeightRole role);

  const WeightSet* files_ = nullptr;
  std::string source_;
  Device device_ = Device::CPU;
  WeightPlacement placement_;
  DType dummy_dtype_ = DType::F32;
  uint64_t seed_ = 0, next_stream_ = 0;
  bool fuse_ = true;
  std::vector<std::string> used_;
  std::deque<std::pair<std::string, Tensor>> made_;  // dummies (host); a deque: host() hands out references
  WeightStorage storage_;
  DeviceBuffer staging_;
};

// Copies host tensor `src` into device memory `dst` (bytes for dst_dtype =
// ops::device_weight_dtype(src, device)): straight, or through `staging` (at most
// staging_limit bytes of whole rows at a time) when the device keeps another layout.
inline constexpr size_t kUploadStagingBytes = size_t{64} << 20;
// `staging` is reused between calls (grown as needed).
void upload_tensor(const Tensor& src, void* dst, Device device, DeviceBuffer& staging,
                   size_t staging_limit = kUploadStagingBytes);

}  // namespace corvid
